package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
)

// benchSeries names a configuration's curve: protocol, destination groups
// per message and durability.
func benchSeries(r benchRow) string {
	return fmt.Sprintf("%s %dg %s", r.Protocol, r.GroupsPerMsg, r.Durability)
}

// benchSVG draws the throughput-latency curves of the rows, as in the
// papers' figures: one colour per configuration (benchSeries), p50 solid
// and p99 dashed, a point per rung of the client ladder labelled with its
// clients, throughput on x and latency on a log scale on y. The SVG is
// self-contained (no scripts, fonts or styles from elsewhere); every point
// has a tooltip with its figures, every curve a
// <g class="curve" data-series="..." data-stat="p50|p99">.
func benchSVG(rows []benchRow) []byte {
	const (
		w, h                     = 960, 600
		left, right, top, bottom = 80, 250, 50, 60
		pw, ph                   = w - left - right, h - top - bottom
	)
	var order []string
	bySeries := map[string][]benchRow{}
	maxX, minY, maxY := 1.0, math.Inf(1), 0.0
	for _, r := range rows {
		s := benchSeries(r)
		if _, ok := bySeries[s]; !ok {
			order = append(order, s)
		}
		bySeries[s] = append(bySeries[s], r)
		maxX = max(maxX, r.Throughput)
		for _, v := range []float64{r.P50ms, r.P99ms} {
			if v > 0 {
				minY, maxY = min(minY, v), max(maxY, v)
			}
		}
	}
	if maxY == 0 {
		minY, maxY = 0.1, 1
	}
	xMax := niceCeil(maxX * 1.05)
	yLo := math.Pow(10, math.Floor(math.Log10(minY)))
	yHi := math.Pow(10, math.Ceil(math.Log10(maxY)))
	if yHi <= yLo {
		yHi = yLo * 10
	}
	px := func(x float64) float64 { return left + x/xMax*pw }
	py := func(y float64) float64 {
		return top + ph - (math.Log10(y)-math.Log10(yLo))/(math.Log10(yHi)-math.Log10(yLo))*ph
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<title>weft bench: latency against throughput</title>
<rect width="%d" height="%d" fill="white"/>
<text x="%d" y="24" font-size="16">Latency (p50 solid, p99 dashed) against throughput, over the client ladder</text>
`, w, h, w, h, w, h, left)
	// Grid, then the frame over it.
	step := xMax / 5
	for i := 0; i <= 5; i++ {
		x := px(float64(i) * step)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x, top, x, top+ph, x, top+ph+18, commaInt(float64(i)*step))
	}
	for d := yLo; d <= yHi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			y := d * m
			if y > yHi*1.0001 {
				break
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, py(y), left+pw, py(y), left-6, py(y)+4, trimFloat(y))
		}
	}
	fmt.Fprintf(&b, `<g class="axes" stroke="#888" fill="none"><rect x="%d" y="%d" width="%d" height="%d"/></g>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">throughput (multicasts/s, messages sent and answered in the window)</text>`+"\n", left+pw/2, h-16)
	fmt.Fprintf(&b, `<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)">latency at the client (ms, log scale)</text>`+"\n", top+ph/2, top+ph/2)
	palette := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}
	for i, s := range order {
		rs := slices.Clone(bySeries[s])
		slices.SortStableFunc(rs, func(a, b benchRow) int { return a.Clients - b.Clients })
		col := palette[i%len(palette)]
		for _, stat := range []string{"p50", "p99"} {
			dash := ""
			if stat == "p99" {
				dash = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(&b, `<g class="curve" data-series="%s" data-stat="%s">`+"\n", html.EscapeString(s), stat)
			var pts bytes.Buffer
			for _, r := range rs {
				v := r.P50ms
				if stat == "p99" {
					v = r.P99ms
				}
				if v > 0 {
					fmt.Fprintf(&pts, "%.1f,%.1f ", px(r.Throughput), py(v))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, bytes.TrimSpace(pts.Bytes()))
			for _, r := range rs {
				v := r.P50ms
				if stat == "p99" {
					v = r.P99ms
				}
				if v <= 0 {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d clients: %s/s, %s %sms</title></circle>`+"\n",
					px(r.Throughput), py(v), col, html.EscapeString(s), r.Clients, commaInt(r.Throughput), stat, trimFloat(v))
				if stat == "p50" {
					fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%d</text>`+"\n", px(r.Throughput)+5, py(v)+12, col, r.Clients)
				}
			}
			b.WriteString("</g>\n")
		}
		// Legend.
		ly := top + 10 + i*22
		fmt.Fprintf(&b, `<g class="legend"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text></g>`+"\n",
			left+pw+16, ly, left+pw+46, ly, col, left+pw+52, ly+4, html.EscapeString(s))
	}
	ly := top + 10 + len(order)*22 + 10
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">solid: p50, dashed: p99;</text><text x="%d" y="%d" font-size="11">numbers: clients of the rung;</text><text x="%d" y="%d" font-size="11">Ng: N groups per message</text>`+"\n",
		left+pw+16, ly, left+pw+16, ly+16, left+pw+16, ly+32)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten.
func niceCeil(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func commaInt(x float64) string {
	n := int64(math.Round(x))
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func trimFloat(x float64) string {
	return fmt.Sprintf("%g", math.Round(x*1000)/1000)
}
