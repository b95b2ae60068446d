package soak

// The summary: Markdown tables for stdout and the results file, and the
// failures the test reports.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

type report struct {
	cfg          config
	began, t0    time.Time
	loadEnd      time.Time
	load         *load
	kills        []kill
	verify       verdict
	crashes      map[string][]string
	crashLogs    map[string]string
	watchers     []*watcher
	final        map[string]objMeta
	loadAvgStart string
	loadAvgEnd   string

	failures []string
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}

// statusKey names an answer for the error tables.
func statusKey(r rec) string {
	if r.status == 0 {
		return r.errK
	}
	return fmt.Sprint(r.status)
}

func (rp *report) atKill(t time.Time) (bool, string) {
	for _, k := range rp.kills {
		if k.at.IsZero() {
			continue
		}
		from, to := k.window()
		if !t.Before(from) && t.Before(to) {
			return true, k.tier
		}
	}
	return false, ""
}

func (rp *report) fail(format string, args ...any) {
	rp.failures = append(rp.failures, fmt.Sprintf(format, args...))
}

func (rp *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	l := rp.load
	elapsed := rp.loadEnd.Sub(rp.t0)

	var good, bad []rec
	for _, r := range l.recs {
		if r.good {
			good = append(good, r)
		} else {
			bad = append(bad, r)
		}
	}

	p("# Soak under faults (issue 19) — %s", rp.t0.Format("2006-01-02 15:04 MST"))
	p("")
	p("docker compose deploy/compose (3 etcd, 2 storage, registry, 3 validators, 2 converters, gateway) plus the conversion webhook; %s of load at %.0f req/s (%.0f%% malformed), a kill every %s (first at %s), restart %s after it.",
		elapsed.Round(time.Second), rp.cfg.rate, 100*rp.cfg.badPct, rp.cfg.killInterval, rp.cfg.killInterval/2, rp.cfg.restartDelay)
	p("Machine: %d vCPUs (shared; load average %s at the start, %s at the end); images %s; commit %s.",
		runtime.NumCPU(), rp.loadAvgStart, rp.loadAvgEnd, imageTag(), commit())
	p("")

	// Headline.
	totalKills := 0
	for _, k := range rp.kills {
		if !k.at.IsZero() {
			totalKills++
		}
	}
	nAcked := 0
	for _, n := range rp.verify.ackedByOp {
		nAcked += n
	}
	var goodOK []time.Duration
	goodErr, goodErrElsewhere, stale := 0, 0, 0
	for _, r := range good {
		if r.status >= 200 && r.status < 300 {
			goodOK = append(goodOK, r.dur)
		} else {
			goodErr++
			if k, _ := rp.atKill(r.start); !k {
				goodErrElsewhere++
			}
		}
		if r.stale {
			stale++
		}
	}
	badMismatch, badWrong, badElsewhere := 0, 0, 0
	for _, r := range bad {
		if r.expected {
			continue
		}
		badMismatch++
		if r.status != 0 && r.status < 500 {
			badWrong++
		} else if k, _ := rp.atKill(r.start); !k {
			badElsewhere++
		}
	}
	crashCount := 0
	for _, c := range rp.crashes {
		crashCount += len(c)
	}
	watchMissed, watchDiverged := 0, 0
	checks := make([]watchCheck, len(rp.watchers))
	for i, w := range rp.watchers {
		checks[i] = w.check(l.acks, rp.final)
		watchMissed += checks[i].missed
		watchDiverged += checks[i].diverged
	}

	p("## Summary")
	p("")
	p("| | |")
	p("|---|---|")
	p("| requests sent (good / malformed) | %d (%d / %d); %d ticks skipped (512 in flight) |", len(l.recs), len(good), len(bad), l.skipped)
	p("| acknowledged writes | **%d** (create %d, update %d, merge patch %d, delete %d) |", nAcked,
		rp.verify.ackedByOp["create"], rp.verify.ackedByOp["update"], rp.verify.ackedByOp["patch"], rp.verify.ackedByOp["delete"])
	p("| acknowledged writes lost | **%d** (%d objects checked, %d present at the end) |", rp.verify.lost, rp.verify.objects, rp.verify.present)
	p("| writes of unknown outcome (no answer or 5xx) | %d (%s) |", sumMap(rp.verify.unknownByOp), unknownList(rp.verify))
	p("| kills | %d (%s) |", totalKills, killTiers(rp.kills))
	p("| unexpected crashes (restarts or exits not from a kill) | **%d** |", crashCount)
	p("| good requests: p50 / p99 (2xx) | **%s / %s ms** |", ms(percentile(goodOK, 0.5)), ms(percentile(goodOK, 0.99)))
	p("| good requests failed | %d (%.2f%%), of which %d outside the kill windows |", goodErr, pct(goodErr, len(good)), goodErrElsewhere)
	p("| reads contradicting an acknowledged write | %d |", stale)
	p("| malformed requests not answered as expected | %d (wrong 2xx/4xx: %d; 5xx/no answer at a kill: %d, elsewhere: %d) |", badMismatch, badWrong, badMismatch-badWrong-badElsewhere, badElsewhere)
	p("| watch: acknowledged changes missed / final state diverged | %d / %d |", watchMissed, watchDiverged)
	p("")
	p("Kill window: from %s before the kill (requests in flight) to 10s after the container serves again.", reqTimeout)
	p("")

	// Kills.
	p("## Kills")
	p("")
	p("| # | at | tier | container | serving again after | good requests failed in its window | the last of them started |")
	p("|---|---|---|---|---|---|---|")
	for _, k := range rp.kills {
		if k.at.IsZero() {
			p("| %d | – | %s | – | %s | | |", k.n, k.tier, k.restartErr)
			continue
		}
		from, to := k.window()
		nf := 0
		lastFail := "–"
		for _, r := range good {
			if (r.status < 200 || r.status >= 300) && !r.start.Before(from) && r.start.Before(to) {
				nf++
				lastFail = fmt.Sprintf("%s from the kill", r.start.Sub(k.at).Round(100*time.Millisecond))
			}
		}
		back := "not recovered: " + k.restartErr
		if !k.recovered.IsZero() {
			back = k.recovered.Sub(k.at).Round(100 * time.Millisecond).String()
		}
		p("| %d | %s | %s | %s | %s | %d | %s |", k.n, k.at.Sub(rp.t0).Round(time.Second), k.tier, strings.TrimSpace(k.container+" "+k.note), back, nf, lastFail)
	}
	p("")

	// Crashes.
	p("## Unexpected crashes")
	p("")
	if crashCount == 0 {
		p("None: no container restarted by its restart policy, started again or exited other than the killed ones (docker inspect RestartCount, State.StartedAt, State.Status, OOMKilled, polled every 10s and at the end).")
	} else {
		p("| container | what |")
		p("|---|---|")
		for _, c := range sortedKeys(rp.crashes) {
			for _, why := range rp.crashes[c] {
				p("| %s | %s |", c, why)
			}
		}
		for _, c := range sortedKeys(rp.crashLogs) {
			p("")
			p("Last log lines of %s when the crash was seen:", c)
			p("")
			p("```")
			p("%s", strings.TrimSpace(rp.crashLogs[c]))
			p("```")
		}
		rp.fail("%d unexpected crashes: %v", crashCount, rp.crashes)
	}
	p("")

	// Latency per minute.
	p("## Good requests per minute")
	p("")
	p("| minute | sent | 2xx | p50 ms | p99 ms | failed | kill |")
	p("|---|---|---|---|---|---|---|")
	minutes := int(elapsed/time.Minute) + 1
	for m := 0; m < minutes; m++ {
		var d []time.Duration
		sent, failed := 0, 0
		for _, r := range good {
			if int(r.start.Sub(rp.t0)/time.Minute) != m {
				continue
			}
			sent++
			if r.status >= 200 && r.status < 300 {
				d = append(d, r.dur)
			} else {
				failed++
			}
		}
		if sent == 0 {
			continue
		}
		var ks []string
		for _, k := range rp.kills {
			if !k.at.IsZero() && int(k.at.Sub(rp.t0)/time.Minute) == m {
				ks = append(ks, k.tier)
			}
		}
		p("| %d | %d | %d | %s | %s | %d | %s |", m+1, sent, len(d), ms(percentile(d, 0.5)), ms(percentile(d, 0.99)), failed, strings.Join(ks, ", "))
	}
	p("")

	// Latency per operation.
	p("## Good requests per operation")
	p("")
	p("| operation | sent | 2xx | p50 ms | p99 ms | p50 ms outside kill windows | p99 ms outside kill windows |")
	p("|---|---|---|---|---|---|---|")
	var allQuiet []time.Duration
	for _, op := range []string{"create", "get", "list", "update", "patch", "delete"} {
		var d, quiet []time.Duration
		sent := 0
		for _, r := range good {
			if r.op != op {
				continue
			}
			sent++
			if r.status >= 200 && r.status < 300 {
				d = append(d, r.dur)
				if k, _ := rp.atKill(r.start); !k {
					quiet = append(quiet, r.dur)
				}
			}
		}
		allQuiet = append(allQuiet, quiet...)
		p("| %s | %d | %d | %s | %s | %s | %s |", op, sent, len(d), ms(percentile(d, 0.5)), ms(percentile(d, 0.99)), ms(percentile(quiet, 0.5)), ms(percentile(quiet, 0.99)))
	}
	p("| **all** | %d | %d | **%s** | **%s** | %s | %s |", len(good), len(goodOK), ms(percentile(goodOK, 0.5)), ms(percentile(goodOK, 0.99)), ms(percentile(allQuiet, 0.5)), ms(percentile(allQuiet, 0.99)))
	p("")

	// Errors by status.
	p("## Good requests not answered 2xx, by status")
	p("")
	type cnt struct{ atKill, elsewhere int }
	byStatus := map[string]*cnt{}
	byTier := map[string]map[string]int{}
	for _, r := range good {
		if r.status >= 200 && r.status < 300 {
			continue
		}
		key := statusKey(r)
		if byStatus[key] == nil {
			byStatus[key] = &cnt{}
		}
		if k, tier := rp.atKill(r.start); k {
			byStatus[key].atKill++
			if byTier[tier] == nil {
				byTier[tier] = map[string]int{}
			}
			byTier[tier][key]++
		} else {
			byStatus[key].elsewhere++
		}
	}
	if len(byStatus) == 0 {
		p("None.")
	} else {
		p("| status | at a kill | elsewhere |")
		p("|---|---|---|")
		for _, k := range sortedKeys(byStatus) {
			p("| %s | %d | %d |", k, byStatus[k].atKill, byStatus[k].elsewhere)
		}
		p("")
		p("At a kill, by tier killed: %s.", tierList(byTier))
	}
	p("")

	// Malformed.
	p("## Malformed requests")
	p("")
	p("| class | expected | sent | as expected | other answers |")
	p("|---|---|---|---|---|")
	for _, c := range l.classes {
		sent, okN := 0, 0
		other := map[string]int{}
		for _, r := range bad {
			if r.op != c.name {
				continue
			}
			sent++
			if r.expected {
				okN++
				continue
			}
			where := "elsewhere"
			if k, _ := rp.atKill(r.start); k {
				where = "at a kill"
			}
			other[statusKey(r)+" "+where]++
		}
		p("| %s | %s | %d | %d | %s |", c.name, c.expect, sent, okN, mapList(other))
	}
	p("")

	// Watches.
	p("## Watches")
	p("")
	p("| watch | events | bookmarks | reconnects | paused | relists (410) | disconnected | acknowledged changes | seen as events or listed | skipped by a relist | missed | final state diverged |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, w := range rp.watchers {
		c := checks[i]
		w.mu.Lock()
		p("| %s | %d | %d | %d | %d | %d | %s | %d | %d | %d | **%d** | **%d** |", w.name, w.events, w.bookmarks, w.reconnects, w.lags, w.relists,
			w.down.Round(100*time.Millisecond), c.expected, c.seen, c.byRelist, c.missed, c.diverged)
		w.mu.Unlock()
		for _, n := range c.missedNotes {
			p("")
			p("- %s missed: %s", w.name, n)
		}
		for _, n := range c.divergedNotes {
			p("")
			p("- %s diverged: %s", w.name, n)
		}
		if c.missed > 0 || c.diverged > 0 {
			rp.fail("watch %s: %d acknowledged changes missed, %d objects diverged (%v %v)", w.name, c.missed, c.diverged, c.missedNotes, c.divergedNotes)
		}
	}
	p("")

	if rp.verify.lost > 0 {
		p("## Lost writes")
		p("")
		for _, k := range sortedKeys(rp.verify.lostByKind) {
			p("- %s: %d", k, rp.verify.lostByKind[k])
		}
		for _, n := range rp.verify.lostNotes {
			p("- %s", n)
		}
		p("")
		rp.fail("%d acknowledged writes lost: %v", rp.verify.lost, rp.verify.lostNotes)
	}
	if len(l.staleNotes) > 0 {
		p("## Reads contradicting an acknowledged write")
		p("")
		for _, n := range l.staleNotes {
			p("- %s", n)
		}
		p("")
		rp.fail("%d reads contradicted an acknowledged write, e.g. %s", stale, l.staleNotes[0])
	}
	if badWrong > 0 {
		rp.fail("%d malformed requests got a wrong 2xx/4xx answer", badWrong)
	}
	if badElsewhere > 0 || goodErrElsewhere > 0 {
		p("Note: %d good and %d malformed requests failed outside the kill windows.", goodErrElsewhere, badElsewhere)
		p("")
	}
	p("Total time, bring-up to verdict: %s.", time.Since(rp.began).Round(time.Second))
	return b.String()
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mapList(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func tierList(m map[string]map[string]int) string {
	var parts []string
	for _, t := range tiers {
		if m[t] != nil {
			parts = append(parts, fmt.Sprintf("%s (%s)", t, mapList(m[t])))
		}
	}
	return strings.Join(parts, "; ")
}

func killTiers(ks []kill) string {
	var parts []string
	for _, k := range ks {
		if !k.at.IsZero() {
			parts = append(parts, k.tier)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func imageTag() string {
	prefix, tag := os.Getenv("CRDPLANE_IMAGE_PREFIX"), os.Getenv("CRDPLANE_TAG")
	if prefix == "" {
		prefix = "crdplane"
	}
	if tag == "" {
		tag = "dev"
	}
	return prefix + "/*:" + tag
}

func commit() string {
	if c := os.Getenv("SOAK_COMMIT"); c != "" {
		return c
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "?"
	}
	c := strings.TrimSpace(string(out))
	if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(st) > 0 {
		c += " + uncommitted changes"
	}
	return c
}

// unknownList: per operation, how many writes of unknown outcome there
// were and how many of them the final read shows applied.
func unknownList(v verdict) string {
	if len(v.unknownByOp) == 0 {
		return "none"
	}
	var parts []string
	for _, op := range []string{"create", "update", "patch", "delete"} {
		if n := v.unknownByOp[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d, %d of them applied", op, n, v.unknownSeen[op+", applied true"]))
		}
	}
	return strings.Join(parts, "; ")
}
