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

// errPts places error bars on the bars of one series.
type errPts struct {
	x0 float64
	s  series
}

func (e errPts) Len() int                { return len(e.s.val) }
func (e errPts) XY(i int) (x, y float64) { return e.x0 + float64(i), nz(e.s.val[i]) }
func (e errPts) YError(i int) (float64, float64) {
	return nz(e.s.val[i]) - nz(e.s.lo[i]), nz(e.s.hi[i]) - nz(e.s.val[i])
}

func nz(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// groupedBars draws one bar per series in each group, with min–max error
// bars, and writes an SVG.
func groupedBars(path, title, ylabel string, groups []string, ss []series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	width := 15 * vg.Centimeter
	if n := len(groups); n > 5 {
		width = vg.Length(n) * 3 * vg.Centimeter
	}
	height := 9 * vg.Centimeter
	k := len(ss)
	slot := 0.8 / float64(k)
	// Bar width in drawing units: the plot's data area is about 85% of the
	// width, for len(groups) data units.
	bw := vg.Length(float64(width) * 0.85 / float64(len(groups)) * slot * 0.9)
	for j, s := range ss {
		vals := make(plotter.Values, len(s.val))
		for i, v := range s.val {
			vals[i] = nz(v)
		}
		bc, err := plotter.NewBarChart(vals, bw)
		if err != nil {
			return err
		}
		bc.XMin = -0.4 + slot*(float64(j)+0.5)
		bc.Color = palette[j%len(palette)]
		bc.LineStyle.Width = 0
		p.Add(bc)
		p.Legend.Add(s.name, bc)
		if s.lo != nil {
			eb, err := plotter.NewYErrorBars(errPts{x0: bc.XMin, s: s})
			if err != nil {
				return err
			}
			eb.LineStyle.Width = vg.Points(0.8)
			p.Add(eb)
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	c := vgsvg.New(width, height)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	// Name fallbacks for viewers without the Liberation fonts gonum uses.
	svg := strings.ReplaceAll(buf.String(), "font-family:Liberation Sans", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif")
	return os.WriteFile(path, []byte(svg), 0o644)
}

func sum3(s Summary, ok bool) (float64, float64, float64) {
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
		if err := groupedBars(filepath.Join(out, name), "Writer throughput by backend (512 B rows, 100 ms flushes, lz4, 1 writer)", "MiB/s (median, bars: min–max)", groups, []series{w, base}); err != nil {
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
			g := fmt.Sprintf("%s %s", c.Backend, map[bool]string{true: "1 s", false: fmt.Sprintf("%d ms", c.FlushMS)}[c.FlushMS == 1000])
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
		if err := groupedBars(filepath.Join(out, name), "Flush latency by backend and flush interval", "ms (median of repetitions, bars: min–max)", groups, []series{p50, p99, mx}); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}
