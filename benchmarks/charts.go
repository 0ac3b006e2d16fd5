package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/redokit/redokit/testkit/bench"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// series is one set of bars: a value per group, with its min–max.
type series struct {
	name        string
	val, lo, hi []float64
}

// pts are one series' points, shifted within each group, with their
// min–max as error bars; missing or non-positive values are left out (the
// axis is logarithmic).
type pts struct {
	x, y, lo, hi []float64
}

func (e pts) Len() int                { return len(e.x) }
func (e pts) XY(i int) (x, y float64) { return e.x[i], e.y[i] }
func (e pts) YError(i int) (float64, float64) {
	return e.y[i] - e.lo[i], e.hi[i] - e.y[i]
}

func ok(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 }

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}

// dotPlot draws one marker per series in each group on a log scale, with
// min–max error bars, and writes an SVG.
func dotPlot(path, title, ylabel string, groups []string, ss []series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	k := len(ss)
	lo, hi := math.Inf(1), math.Inf(-1)
	for j, s := range ss {
		var e pts
		dx := 0.0
		if k > 1 {
			dx = -0.25 + 0.5*float64(j)/float64(k-1)
		}
		for i, v := range s.val {
			if !ok(v) {
				continue
			}
			l, h := v, v
			if s.lo != nil && ok(s.lo[i]) {
				l = s.lo[i]
			}
			if s.hi != nil && ok(s.hi[i]) {
				h = s.hi[i]
			}
			e.x, e.y, e.lo, e.hi = append(e.x, float64(i)+dx), append(e.y, v), append(e.lo, l), append(e.hi, h)
			lo, hi = math.Min(lo, l), math.Max(hi, h)
		}
		if len(e.x) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(e)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: palette[j%len(palette)], Radius: vg.Points(3.5), Shape: glyphs[j%len(glyphs)]}
		eb, err := plotter.NewYErrorBars(e)
		if err != nil {
			return err
		}
		eb.LineStyle.Color = palette[j%len(palette)]
		eb.LineStyle.Width = vg.Points(1)
		p.Add(eb, sc)
		p.Legend.Add(s.name, sc)
	}
	if math.IsInf(lo, 0) {
		return nil
	}
	// Headroom above the data for the legend.
	p.Y.Min, p.Y.Max = lo/2, hi*8
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	width := max(16*vg.Centimeter, vg.Length(len(groups))*3.2*vg.Centimeter)
	c := vgsvg.New(width, 10*vg.Centimeter)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	// Name fallbacks for viewers without the Liberation fonts gonum uses.
	svg := strings.ReplaceAll(buf.String(), "font-family:Liberation Sans", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif")
	svg = strings.ReplaceAll(svg, "font-family:Liberation Serif", "font-family:'Liberation Serif','Times New Roman',serif")
	return os.WriteFile(path, []byte(svg), 0o644)
}

func sum3(s bench.Summary, ok bool) (float64, float64, float64) {
	if !ok {
		return math.NaN(), math.NaN(), math.NaN()
	}
	return s.Median, s.Min, s.Max
}

// writeCharts draws throughput by backend and flush latency by backend and
// flush interval, and returns the file names.
func writeCharts(out string, r *Report) ([]string, error) {
	var files []string
	prim := r.cell(func(c Cell) bool { return c.hasRole(rolePrimary) })
	if len(prim) > 0 {
		var groups []string
		w := series{name: "redokit writer (payload)"}
		base := series{name: "raw baseline (append / PUT of the same bytes)"}
		for _, cr := range prim {
			groups = append(groups, cr.Cell.Backend)
			a, b, c := sum3(cr.Metrics["write_mib_s"], true)
			if _, ok := cr.Metrics["write_mib_s"]; !ok {
				a, b, c = math.NaN(), math.NaN(), math.NaN()
			}
			w.val, w.lo, w.hi = append(w.val, a), append(w.lo, b), append(w.hi, c)
			bm := "base_append_mib_s"
			if _, ok := cr.Metrics["base_put_mib_s"]; ok {
				bm = "base_put_mib_s"
			}
			s, ok := cr.Metrics[bm]
			a, b, c = sum3(s, ok)
			base.val, base.lo, base.hi = append(base.val, a), append(base.lo, b), append(base.hi, c)
		}
		name := "throughput.svg"
		if err := dotPlot(filepath.Join(out, name), "Writer throughput by backend", "MiB/s (median, min–max)", groups, []series{w, base}); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	lat := r.cell(func(c Cell) bool { return c.hasRole(rolePrimary) || c.hasRole(roleLatency1) })
	if len(lat) > 0 {
		var groups []string
		p50 := series{name: "p50"}
		p99 := series{name: "p99"}
		mx := series{name: "max"}
		for _, cr := range lat {
			c := cr.Cell
			g := fmt.Sprintf("%s\n%s", c.Backend, map[bool]string{true: "1 s", false: fmt.Sprintf("%d ms", c.FlushMS)}[c.FlushMS == 1000])
			groups = append(groups, g)
			for _, x := range []struct {
				s *series
				k string
			}{{&p50, "flush_p50_ms"}, {&p99, "flush_p99_ms"}, {&mx, "flush_max_ms"}} {
				s, ok := cr.Metrics[x.k]
				a, b, cc := sum3(s, ok)
				x.s.val, x.s.lo, x.s.hi = append(x.s.val, a), append(x.s.lo, b), append(x.s.hi, cc)
			}
		}
		name := "latency.svg"
		if err := dotPlot(filepath.Join(out, name), "Flush latency by backend and flush interval", "ms (median, min–max)", groups, []series{p50, p99, mx}); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}
