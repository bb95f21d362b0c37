package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteHTML writes the report as a self-contained page: the summary table,
// latency over time (p50 and p99 per second) and throughput over time, the
// charts as inline SVG. No scripts, no external resources.
func WriteHTML(w io.Writer, r *Report) error {
	tmpl, err := template.New("page").Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("html report template: %w", err)
	}
	page := htmlPage{
		R:          r,
		Errors:     strings.TrimPrefix(countsSuffix(r.ErrorsByStatus, r.TransportErrors), " "),
		Latency:    latencyChart(r),
		Throughput: throughputChart(r),
	}
	if err := tmpl.Execute(w, page); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

type htmlPage struct {
	R                   *Report
	Errors              string
	Latency, Throughput chart
}

// Mode, Scenario, Targets and the ceiling lines are formatted for the template.
func (p htmlPage) Mode() string            { return modeLine(p.R) }
func (p htmlPage) Scenario() string        { return scenarioLine(p.R) }
func (p htmlPage) Targets() string         { return strings.Join(p.R.Targets, ", ") }
func (p htmlPage) CeilingHeadline() string { return ceilingHeadline(p.R) }
func (p htmlPage) CeilingDetail() string   { return ceilingDetail(p.R) }

// chart is a line chart laid out for the SVG template: every coordinate
// is computed here, the template only places them.
type chart struct {
	Title          string
	W, H           int
	X0, X1, Y0, Y1 float64 // plot area: left, right, top, bottom
	TickEnd        float64 // lower end of the x tick marks
	XTicks, YTicks []tick
	XLabel, YLabel string
	Lines          []line
	Empty          bool
}

type tick struct {
	Pos   float64
	Label string
}

type line struct {
	Name, Color, Dash string
	Points            string
	Dots              []point // marks on the points, when there are few
	LegendX           float64
}

type point struct{ X, Y float64 }

type seriesData struct {
	name, color, dash string
	ys                []float64
}

// drawnSeconds are the measured seconds; completions after the end (the
// last requests draining) are in the JSON but not drawn.
func drawnSeconds(r *Report) []Second {
	n := min(len(r.Seconds), int(math.Ceil(r.DurationS)))
	return r.Seconds[:max(n, 0)]
}

func latencyChart(r *Report) chart {
	secs := drawnSeconds(r)
	p50, p99 := make([]float64, len(secs)), make([]float64, len(secs))
	for i, s := range secs {
		p50[i], p99[i] = s.P50, s.P99
	}
	return layout("Latency per second", "ms", []seriesData{
		{name: "p50", color: "#2b6cb0", ys: p50},
		{name: "p99", color: "#dd6b20", ys: p99},
	})
}

func throughputChart(r *Report) chart {
	secs := drawnSeconds(r)
	ok, bad := make([]float64, len(secs)), make([]float64, len(secs))
	hasErrors := false
	for i, s := range secs {
		ok[i], bad[i] = float64(s.Requests), float64(s.Errors)
		hasErrors = hasErrors || s.Errors > 0
	}
	data := []seriesData{{name: "requests/s", color: "#2f855a", ys: ok}}
	if hasErrors {
		data = append(data, seriesData{name: "errors/s", color: "#c53030", ys: bad})
	}
	if c := r.Ceiling; c != nil {
		cs := drawnSeconds(c)
		ys := make([]float64, len(cs))
		for i, s := range cs {
			ys[i] = float64(s.Requests)
		}
		data = append(data, seriesData{name: "ceiling requests/s (separate run)", color: "#718096", dash: "6 4", ys: ys})
	}
	return layout("Throughput per second", "req/s", data)
}

// maxDots: up to this many seconds, every point gets a mark.
const maxDots = 60

// layout scales the series into an SVG plot area: x is the second of the
// run (each point in the middle of its second), y starts at zero.
func layout(title, unit string, data []seriesData) chart {
	c := chart{Title: title, W: 1040, H: 256, X0: 70, X1: 1020, Y0: 40, Y1: 216, TickEnd: 221, XLabel: "seconds into the measured run", YLabel: unit}
	n, top := 0, 0.0
	for _, d := range data {
		n = max(n, len(d.ys))
		for _, y := range d.ys {
			top = max(top, y)
		}
	}
	if n == 0 {
		c.Empty = true
		return c
	}
	step := niceStep(top)
	yMax := step * math.Max(math.Ceil(top/step), 1)
	x := func(i float64) float64 { return c.X0 + (c.X1-c.X0)*i/float64(n) }
	y := func(v float64) float64 { return c.Y1 - (c.Y1-c.Y0)*v/yMax }
	for v := 0.0; v <= yMax+step/2; v += step {
		c.YTicks = append(c.YTicks, tick{Pos: y(v), Label: formatTick(v)})
	}
	every := max(1, int(math.Ceil(float64(n)/20)))
	for i := 0; i <= n; i += every {
		c.XTicks = append(c.XTicks, tick{Pos: x(float64(i)), Label: strconv.Itoa(i)})
	}
	legendX := c.X0
	for _, d := range data {
		pts := make([]string, len(d.ys))
		var dots []point
		for i, v := range d.ys {
			pt := point{X: x(float64(i) + 0.5), Y: y(v)}
			pts[i] = fmt.Sprintf("%.1f,%.1f", pt.X, pt.Y)
			if n <= maxDots && d.dash == "" {
				dots = append(dots, pt)
			}
		}
		c.Lines = append(c.Lines, line{Name: d.name, Color: d.color, Dash: d.dash, Points: strings.Join(pts, " "), Dots: dots, LegendX: legendX})
		legendX += 40 + 7.5*float64(len(d.name))
	}
	return c
}

// niceStep is a 1, 2 or 5 times a power of ten that cuts 0..top into about
// five intervals.
func niceStep(top float64) float64 {
	if top <= 0 {
		return 1
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func formatTick(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>linkraft bench: {{.R.Scenario}} ({{.R.RunID}})</title>
<style>
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif;color:#1a202c;margin:32px auto;max-width:1040px;padding:0 24px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:16px;margin:28px 0 8px}
.sub{color:#4a5568;margin:0 0 16px}
table{border-collapse:collapse;margin:8px 0 0}
th,td{padding:4px 18px 4px 0;text-align:left;border-bottom:1px solid #e2e8f0;vertical-align:top}
th{color:#4a5568;font-weight:600}
.num{text-align:right;font-variant-numeric:tabular-nums}
.ratio{margin:20px 0 0;padding:10px 14px;background:#f0fff4;border-left:4px solid #2f855a;color:#4a5568}
.ratio strong{font-size:17px;color:#1a202c}
svg{display:block;border:1px solid #e2e8f0;border-radius:6px;background:#fff;max-width:100%;height:auto}
svg text{font:12px "DejaVu Sans",Helvetica,Arial,sans-serif;fill:#4a5568}
.grid{stroke:#edf2f7}
.axis{stroke:#a0aec0}
</style>
</head>
<body>
<h1>linkraft bench — {{.R.Scenario}}</h1>
<p class="sub">run {{.R.RunID}} · {{.R.Server}} at {{.Targets}}</p>
<table>
<tr><th>scenario</th><td>{{.Scenario}}</td></tr>
<tr><th>mode</th><td>{{.Mode}}</td></tr>
<tr><th>started</th><td>{{.R.StartedAt}}</td></tr>
<tr><th>duration</th><td>{{.R.DurationS}} s after {{.R.WarmupS}} s warm-up (measured {{printf "%.2f" .R.ElapsedS}} s)</td></tr>
<tr><th>requests</th><td>{{.R.Requests}}</td></tr>
<tr><th>throughput</th><td>{{printf "%.1f" .R.Throughput}} req/s</td></tr>
<tr><th>success</th><td>{{.R.Success}}</td></tr>
<tr><th>errors</th><td>{{.R.Errors}}{{if .Errors}} {{.Errors}}{{end}}</td></tr>
{{if eq .R.Mode "open"}}<tr><th>late sends</th><td>{{.R.LateSends}} (started &gt; 1 ms after their intended time); {{.R.Unsent}} never sent</td></tr>{{end}}
</table>

<h2>Latency (ms{{if eq .R.Mode "open"}}, from the intended send time{{end}})</h2>
<table>
<tr><th></th><th class="num">p50</th><th class="num">p90</th><th class="num">p99</th><th class="num">p99.9</th><th class="num">max</th><th class="num">requests</th></tr>
<tr><td>all</td>{{template "lat" .R.Latency}}<td class="num">{{.R.Requests}}</td></tr>
{{if gt (len .R.Ops) 1}}{{range .R.Ops}}<tr><td>{{.Op}}</td>{{template "lat" .Latency}}<td class="num">{{.Requests}}</td></tr>{{end}}{{end}}
{{with .R.Ceiling}}<tr><td>ceiling (in-process fasthttp)</td>{{template "lat" .Latency}}<td class="num">{{.Requests}}</td></tr>{{end}}
</table>
{{with .R.Ceiling}}<p class="ratio"><strong>{{$.CeilingHeadline}}</strong><br><span>{{$.CeilingDetail}}</span></p>{{end}}

<h2>{{.Latency.Title}}</h2>
{{template "chart" .Latency}}
<h2>{{.Throughput.Title}}</h2>
{{template "chart" .Throughput}}
</body>
</html>
{{define "lat"}}<td class="num">{{printf "%.3f" .P50}}</td><td class="num">{{printf "%.3f" .P90}}</td><td class="num">{{printf "%.3f" .P99}}</td><td class="num">{{printf "%.3f" .P999}}</td><td class="num">{{printf "%.3f" .Max}}</td>{{end}}
{{define "chart"}}{{if .Empty}}<p>No measured seconds to draw.</p>{{else}}<svg viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" aria-label="{{.Title}}">
{{range .YTicks}}<line class="grid" x1="{{$.X0}}" x2="{{$.X1}}" y1="{{.Pos}}" y2="{{.Pos}}"/>
<text x="{{$.X0}}" dx="-8" y="{{.Pos}}" dy="4" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="axis" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$.Y1}}" y2="{{$.TickEnd}}"/>
<text x="{{.Pos}}" y="{{$.Y1}}" dy="18" text-anchor="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{.X0}}" x2="{{.X1}}" y1="{{.Y1}}" y2="{{.Y1}}"/>
<line class="axis" x1="{{.X0}}" x2="{{.X0}}" y1="{{.Y0}}" y2="{{.Y1}}"/>
<text x="{{.X1}}" y="{{.Y1}}" dy="36" text-anchor="end">{{.XLabel}}</text>
<text x="{{.X0}}" dx="-8" y="{{.Y0}}" dy="-14" text-anchor="end">{{.YLabel}}</text>
{{range .Lines}}<polyline fill="none" stroke="{{.Color}}" stroke-width="2" stroke-linejoin="round"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}} points="{{.Points}}"/>
{{$color := .Color}}{{range .Dots}}<circle cx="{{.X}}" cy="{{.Y}}" r="3" fill="{{$color}}"/>{{end}}
<rect x="{{.LegendX}}" y="13" width="18" height="4" fill="{{.Color}}"/><text x="{{.LegendX}}" dx="24" y="20">{{.Name}}</text>
{{end}}</svg>{{end}}{{end}}
`
