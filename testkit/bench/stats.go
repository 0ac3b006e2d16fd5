package bench

import (
	"math"
	"sort"
)

// NoisyThreshold: a figure whose spread (max − min over the repetitions) is
// above this fraction of its median is labelled noisy.
const NoisyThreshold = 0.20

// Summary is one figure over the repetitions of a run.
type Summary struct {
	Samples []float64 `json:"samples"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Q1      float64   `json:"q1"`
	Q3      float64   `json:"q3"`
	// Spread is (max − min) / median.
	Spread float64 `json:"spread"`
	Noisy  bool    `json:"noisy"`
}

// Sig rounds x to 5 significant digits: the figures are not more precise,
// and results.json stays small.
func Sig(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow(10, 4-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// Rounded returns s with every number cut to 5 significant digits.
func (s Summary) Rounded() Summary {
	for i, v := range s.Samples {
		s.Samples[i] = Sig(v)
	}
	s.Median, s.Min, s.Max, s.Q1, s.Q3, s.Spread = Sig(s.Median), Sig(s.Min), Sig(s.Max), Sig(s.Q1), Sig(s.Q3), Sig(s.Spread)
	return s
}

// Summarize summarizes the samples xs.
func Summarize(xs []float64) Summary {
	s := Summary{Samples: append([]float64(nil), xs...)}
	if len(xs) == 0 {
		return s
	}
	v := append([]float64(nil), xs...)
	sort.Float64s(v)
	s.Min, s.Max = v[0], v[len(v)-1]
	s.Median = Quantile(v, 0.5)
	s.Q1, s.Q3 = Quantile(v, 0.25), Quantile(v, 0.75)
	if s.Median != 0 {
		s.Spread = (s.Max - s.Min) / math.Abs(s.Median)
	}
	s.Noisy = len(v) > 1 && s.Spread > NoisyThreshold
	return s
}

// Quantile of sorted values, linear between closest ranks.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return sorted[lo]
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Percentiles returns p50, p99 and max of xs (unsorted; xs is sorted in place).
func Percentiles(xs []float64) (p50, p99, max float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	sort.Float64s(xs)
	return Quantile(xs, 0.5), Quantile(xs, 0.99), xs[len(xs)-1]
}
