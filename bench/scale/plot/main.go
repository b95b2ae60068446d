// Command plot draws the scale benchmark's curves (bench/upstream's
// TestScale, make bench-scale) as SVG, with no dependency beyond the
// standard library: Established time, resident set and discovery latencies
// against the number of CRDs, one line per server and measure, both axes
// logarithmic.
//
//	go run ./bench/scale/plot -out bench/scale/results bench/scale/results/<run>.csv
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("out", ".", "directory for the SVG files")
	flag.Parse()
	if flag.NArg() == 0 {
		slog.Error("usage: plot [-out dir] results.csv...")
		os.Exit(2)
	}
	var rows []map[string]string
	for _, p := range flag.Args() {
		r, err := readCSV(p)
		if err != nil {
			slog.Error("read results", "file", p, "err", err)
			os.Exit(1)
		}
		rows = append(rows, r...)
	}
	charts := []chart{
		{file: "established.svg", title: "Time until all N CRDs are Established (8 workers)", unit: "s",
			series: []measure{{"established_s", "", 1}}},
		{file: "rss.svg", title: "Memory with N idle CRDs (one process, storage included)", unit: "MiB",
			series: []measure{{"rss", "RSS", 1.0 / (1 << 20)}, {"heap", "Go heap in use", 1.0 / (1 << 20)}}},
		{file: "discovery.svg", title: "One new CRD visible; kubectl api-resources (fresh cache)", unit: "s",
			series: []measure{{"discovery_s", "aggregated discovery", 1}, {"openapi_s", "/openapi/v3", 1}, {"api_resources_s", "kubectl api-resources", 1}}},
	}
	for _, c := range charts {
		svg := c.render(rows)
		if err := os.WriteFile(filepath.Join(*out, c.file), []byte(svg), 0o600); err != nil {
			slog.Error("write chart", "file", c.file, "err", err)
			os.Exit(1)
		}
		fmt.Println(filepath.Join(*out, c.file))
	}
}

func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			if i < len(rec) {
				row[h] = rec[i]
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// measure is one column drawn as a line per server.
type measure struct {
	column, label string
	scale         float64
}

type chart struct {
	file, title, unit string
	series            []measure
}

type line struct {
	label string
	pts   [][2]float64 // (N, value)
	color string
	dash  string
}

var colors = map[string]string{"crdplane": "#1f77b4", "crdplane-base": "#7f7f7f", "upstream": "#d62728"}
var dashes = []string{"", "6,4", "2,3"}

func (c chart) lines(rows []map[string]string) []line {
	var ls []line
	var servers []string
	for _, r := range rows {
		if !slices.Contains(servers, r["server"]) {
			servers = append(servers, r["server"])
		}
	}
	for _, s := range servers {
		for mi, m := range c.series {
			l := line{label: s, color: colors[s], dash: dashes[mi%len(dashes)]}
			if m.label != "" {
				l.label += ": " + m.label
			}
			if l.color == "" {
				l.color = "#555"
			}
			for _, r := range rows {
				if r["server"] != s {
					continue
				}
				n, err1 := strconv.ParseFloat(r["n"], 64)
				v, err2 := strconv.ParseFloat(r[m.column], 64)
				if err1 != nil || err2 != nil || v <= 0 || n <= 0 {
					continue // not measured (capped, failed)
				}
				l.pts = append(l.pts, [2]float64{n, v * m.scale})
			}
			slices.SortFunc(l.pts, func(a, b [2]float64) int { return int(a[0] - b[0]) })
			if len(l.pts) > 0 {
				ls = append(ls, l)
			}
		}
	}
	return ls
}

const (
	width, height          = 720, 440
	left, right, top, bott = 70, 230, 40, 50
)

// render draws the chart on log-log axes spanning whole decades.
func (c chart) render(rows []map[string]string) string {
	ls := c.lines(rows)
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range ls {
		for _, p := range l.pts {
			xmin, xmax = math.Min(xmin, p[0]), math.Max(xmax, p[0])
			ymin, ymax = math.Min(ymin, p[1]), math.Max(ymax, p[1])
		}
	}
	if len(ls) == 0 {
		xmin, xmax, ymin, ymax = 100, 10000, 1, 10
	}
	x0, x1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	y0, y1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if x1 == x0 {
		x1++
	}
	if y1 == y0 {
		y1++
	}
	pw, ph := float64(width-left-right), float64(height-top-bott)
	px := func(x float64) float64 { return left + (math.Log10(x)-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return top + ph - (math.Log10(y)-y0)/(y1-y0)*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", left, esc(c.title))
	// grid: decades and their 2x, 5x
	for e := x0; e <= x1; e++ {
		for _, m := range []float64{1, 2, 5} {
			x := m * math.Pow(10, e)
			if math.Log10(x) > x1+1e-9 {
				break
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(x), top, px(x), top+ph)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), top+ph+16, num(x))
		}
	}
	for e := y0; e <= y1; e++ {
		for _, m := range []float64{1, 2, 5} {
			y := m * math.Pow(10, e)
			if math.Log10(y) > y1+1e-9 {
				break
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), left+pw, py(y))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, num(y))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">CRDs (N)</text>`+"\n", left+pw/2, height-12)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">%s</text>`+"\n", top+ph/2, top+ph/2, esc(c.unit))
	for i, l := range ls {
		var pts []string
		for _, p := range l.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		dash := ""
		if l.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), l.color, dash)
		for _, p := range l.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s N=%s: %s %s</title></circle>`+"\n",
				px(p[0]), py(p[1]), l.color, esc(l.label), num(p[0]), num(p[1]), esc(c.unit))
		}
		ly := float64(top + 10 + 20*i)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/>`+"\n", left+pw+12, ly, left+pw+40, ly, l.color, dash)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left+pw+46, ly+4, esc(l.label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'g', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
