package conformance

import (
	"regexp"
	"strconv"
	"time"
)

// messageRVRE finds resourceVersions that upstream's messages quote from
// storage: a precondition that failed ("the ResourceVersion in the
// precondition (1) does not match the ResourceVersion in record (13)") and
// a version not reached yet ("Too large resource version: 99999999,
// current: 170"). Each server numbers its own revisions.
var messageRVRE = regexp.MustCompile(`(ResourceVersion in (?:the precondition|record) \(|Too large resource version: [0-9]+, current: )[0-9]+`)

// messageRVs replaces the resourceVersions in a message.
func messageRVs(s string) string {
	return messageRVRE.ReplaceAllString(s, "${1}<resourceVersion>")
}

// ageRE is a duration as a Table's date cell renders it
// (duration.HumanDuration): 5s, 3m20s, 7m, 2h15m, 20h, 6y330d, ...
var ageRE = regexp.MustCompile(`^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$`)

// tableAges replaces the cells of a Table's date columns that are less than
// a day old (an object's Age: how long ago each server created it, at the
// second) by <age>, as timestamps within a day of the run are replaced.
// Older dates (a case's own fixed dates) are kept.
func tableAges(t map[string]any) {
	if t["kind"] != "Table" {
		return
	}
	cols, _ := t["columnDefinitions"].([]any)
	var dates []int
	for i, c := range cols {
		if m, _ := c.(map[string]any); m["type"] == "date" {
			dates = append(dates, i)
		}
	}
	rows, _ := t["rows"].([]any)
	for _, r := range rows {
		m, _ := r.(map[string]any)
		cells, _ := m["cells"].([]any)
		for _, i := range dates {
			if i >= len(cells) {
				continue
			}
			if s, ok := cells[i].(string); ok && recentAge(s) {
				cells[i] = "<age>"
			}
		}
	}
}

func recentAge(s string) bool {
	m := ageRE.FindStringSubmatch(s)
	if m == nil || s == "" {
		return false
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return false
		}
		d += time.Duration(n) * unit
	}
	return d < 24*time.Hour
}
