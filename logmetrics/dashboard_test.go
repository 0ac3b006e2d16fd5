package logmetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/logmetrics"
	"github.com/redokit/redokit/writer"
)

// dashboardPath is the Grafana dashboard docs/OPERATIONS.md describes.
const dashboardPath = "../docs/grafana/redokit-dashboard.json"

// notOnDashboard lists exported metric families the dashboard may leave out,
// each with the reason. It is empty: every metric the collector exports has
// a panel, and a new metric without one fails TestDashboard until it gets a
// panel or a line here saying why operators need not see it.
var notOnDashboard = map[string]string{}

// targetLabels are the labels Prometheus itself adds to every scraped
// series; a query may group by them though no collector exports them.
var targetLabels = map[string]bool{"instance": true, "job": true}

// TestDashboard holds the committed Grafana dashboard to the metrics the
// code exports: every metric name and label a panel's or a variable's
// PromQL names must be one the collector exports, read from the collector
// itself, and every exported family must appear in some panel.
func TestDashboard(t *testing.T) {
	ex := exported(t)
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	use, problems := checkDashboard(raw, ex)
	for _, p := range problems {
		t.Error(p)
	}
	// The reverse: a metric no panel shows is one nobody alerts on.
	for _, name := range ex.names() {
		if !use[name] && notOnDashboard[name] == "" {
			t.Errorf("metric %s is exported but no panel of %s uses it: add a panel, or list it in notOnDashboard with the reason", name, dashboardPath)
		}
	}
	for name := range notOnDashboard {
		if _, ok := ex.families[name]; !ok {
			t.Errorf("notOnDashboard lists %s, which the collector does not export", name)
		}
	}
	if len(use) == 0 {
		t.Fatalf("%s: no metric found in any panel", dashboardPath)
	}
}

// TestDashboardCheckerFails proves the checker rejects what it is meant to:
// each case is a dashboard that names something the code does not export,
// or that the checker cannot read and so must not pass.
func TestDashboardCheckerFails(t *testing.T) {
	ex := exported(t)
	panel := func(expr string) string {
		b, _ := json.Marshal(expr)
		return `{"panels":[{"type":"timeseries","id":1,"title":"p","description":"d","datasource":{"type":"prometheus","uid":"${datasource}"},"targets":[{"refId":"A","expr":` + string(b) + `}]}],` +
			`"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"}]}}`
	}
	ok := panel(`histogram_quantile(0.99, sum by (le, log, writer) (rate(redokit_writer_flush_duration_seconds_bucket{log=~"$log"}[$__rate_interval])))`)
	if _, problems := checkDashboard([]byte(ok), ex); len(problems) != 0 {
		t.Fatalf("a valid dashboard fails: %q", problems)
	}
	for _, c := range []struct{ name, expr, want string }{
		{"unknown metric", `rate(redokit_writer_no_such_total[5m])`, "redokit_writer_no_such_total"},
		{"unknown metric beside a known one", `redokit_writer_buffered_bytes / redokit_writer_bufferd_bytes`, "redokit_writer_bufferd_bytes"},
		{"histogram without a suffix", `redokit_writer_flush_duration_seconds`, "histogram"},
		{"bucket of a counter", `redokit_writer_segments_total_bucket`, "redokit_writer_segments_total_bucket"},
		{"counter without _total", `rate(redokit_writer_events[5m])`, "redokit_writer_events"},
		{"unknown label", `sum by (writer_id) (redokit_writer_buffered_bytes)`, "writer_id"},
		{"unknown matcher label", `redokit_writer_buffered_bytes{changefeed="x"}`, "changefeed"},
		{"regex on __name__", `{__name__=~"redokit_.*"}`, "__name__"},
		{"name by __name__", `{__name__="redokit_writer_nope"}`, "redokit_writer_nope"},
		{"unknown function", `rte(redokit_writer_segments_total[5m])`, "rte"},
		{"empty expression", ``, "empty"},
	} {
		_, problems := checkDashboard([]byte(panel(c.expr)), ex)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: %q: problems %q, want one naming %q", c.name, c.expr, problems, c.want)
		}
	}
	for _, c := range []struct{ name, dash, want string }{
		{"variable on an unknown metric", `{"panels":[],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"},{"type":"query","name":"log","query":{"query":"label_values(redokit_writer_nope, log)"}}]}}`, "redokit_writer_nope"},
		{"variable query not understood", `{"panels":[],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"},{"type":"query","name":"log","query":"query_result(up)"}]}}`, "query_result"},
		{"fixed datasource", `{"panels":[{"type":"timeseries","title":"p","datasource":{"type":"prometheus","uid":"abc"},"targets":[{"refId":"A","expr":"redokit_writer_buffered_bytes"}]}],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"}]}}`, "datasource"},
		{"no datasource variable", `{"panels":[]}`, "datasource variable"},
		{"no description", `{"panels":[{"type":"timeseries","title":"p","datasource":{"type":"prometheus","uid":"${datasource}"},"targets":[{"refId":"A","expr":"redokit_writer_buffered_bytes"}]}],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"}]}}`, "no description"},
		{"duplicate id", `{"panels":[{"type":"text","id":3,"title":"a"},{"type":"text","id":3,"title":"b"}],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"}]}}`, "share the id 3"},
		{"nested panel", `{"panels":[{"type":"row","title":"r","panels":[{"type":"timeseries","title":"p","datasource":{"type":"prometheus","uid":"${datasource}"},"targets":[{"refId":"A","expr":"redokit_writer_nope"}]}]}],"templating":{"list":[{"type":"datasource","name":"datasource","query":"prometheus"}]}}`, "redokit_writer_nope"},
	} {
		_, problems := checkDashboard([]byte(c.dash), ex)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: problems %q, want one naming %q", c.name, problems, c.want)
		}
	}
}

// exports is what the collector exports: each family's type, and every
// label name its series carry.
type exports struct {
	families map[string]dto.MetricType
	labels   map[string]bool
}

func (e exports) names() []string {
	var out []string
	for n := range e.families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// exported registers a Collector tracking one live writer with a fresh
// registry and gathers it: the names come from the code, not from a list.
// The Collector emits every family for every writer it tracks; that each
// described metric was gathered is checked, so a family emitted only
// sometimes cannot escape the check.
func exported(t *testing.T) exports {
	t.Helper()
	ctx := context.Background()
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	// The log-level collector of a Service with one writer: it exports the
	// service's metrics and, through writermetrics, its writer's.
	log, err := redokit.Open(ctx, b, "dash")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := log.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	if _, err := svc.OpenWriter(ctx, "w1", &writer.Options{FlushInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := logmetrics.New("dash", svc)
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ex := exports{families: map[string]dto.MetricType{}, labels: map[string]bool{}}
	for _, mf := range mfs {
		ex.families[mf.GetName()] = mf.GetType()
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				ex.labels[l.GetName()] = true
			}
		}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			ex.labels["le"] = true
		}
	}
	descs := make(chan *prometheus.Desc, 100)
	c.Describe(descs)
	close(descs)
	if n := len(descs); n != len(ex.families) || n == 0 {
		t.Fatalf("the collector describes %d metrics but a scrape of a tracked writer gathered %d families (%v)", n, len(ex.families), ex.names())
	}
	return ex
}

// checkDashboard returns the exported families the dashboard's PromQL uses
// and every problem found: a name or label not exported, an expression or
// variable query it cannot read, a panel not on the datasource variable.
func checkDashboard(raw []byte, ex exports) (map[string]bool, []string) {
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, []string{fmt.Sprintf("%s does not parse: %v", dashboardPath, err)}
	}
	use := map[string]bool{}
	var problems []string
	check := func(where, expr string) { problems = append(problems, checkExpr(where, expr, ex, use)...) }

	hasDatasourceVar := false
	for _, v := range d.Templating.List {
		where := fmt.Sprintf("variable %q", v.Name)
		switch v.Type {
		case "datasource":
			var q string
			if json.Unmarshal(v.Query, &q) == nil && q == "prometheus" && v.Name == "datasource" {
				hasDatasourceVar = true
			}
		case "query":
			q := queryText(v.Query)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				problems = append(problems, fmt.Sprintf("%s: query %q is not label_values(selector, label), the only form this test reads", where, q))
				continue
			}
			check(where, m[1])
			if !ex.labels[m[2]] {
				problems = append(problems, fmt.Sprintf("%s: label %q is on no exported series", where, m[2]))
			}
		}
	}
	if !hasDatasourceVar {
		problems = append(problems, `no datasource variable named "datasource" of type prometheus: the dashboard must not be tied to one Prometheus`)
	}

	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if other, dup := ids[p.ID]; dup {
				problems = append(problems, fmt.Sprintf("panels %q and %q share the id %d: Grafana keeps one", other, p.Title, p.ID))
			}
			ids[p.ID] = p.Title
			if len(p.Targets) == 0 {
				continue
			}
			// The description is where a panel says what to alert on.
			if strings.TrimSpace(p.Description) == "" {
				problems = append(problems, fmt.Sprintf("panel %q has no description", p.Title))
			}
			if p.Datasource.UID != "${datasource}" {
				problems = append(problems, fmt.Sprintf("panel %q: datasource uid %q, want ${datasource}", p.Title, p.Datasource.UID))
			}
			for _, tg := range p.Targets {
				check(fmt.Sprintf("panel %q, query %s", p.Title, tg.RefID), tg.Expr)
			}
		}
	}
	walk(d.Panels)
	return use, problems
}

// checkExpr checks one PromQL expression against ex, marking the families
// it uses in use, and returns its problems.
func checkExpr(where, expr string, ex exports, use map[string]bool) []string {
	q, err := scanPromQL(expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", where, err)}
	}
	var problems []string
	for _, n := range q.names {
		fam, err := ex.family(n)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		use[fam] = true
	}
	for _, l := range q.labels {
		if !ex.labels[l] && !targetLabels[l] {
			problems = append(problems, fmt.Sprintf("%s: label %q is on no exported series (exported: %v)", where, l, keys(ex.labels)))
		}
	}
	return problems
}

type panel struct {
	Type        string `json:"type"`
	ID          int    `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row holds its panels
}

var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// queryText is a variable's query, which Grafana stores as a string or as
// an object with a query field.
func queryText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	json.Unmarshal(raw, &o)
	return o.Query
}

// family maps a series name a query selects to the exported family it
// belongs to. A histogram exports no series under its own name, only
// _bucket, _sum and _count; a counter's family name already ends in _total.
func (e exports) family(name string) (string, error) {
	if typ, ok := e.families[name]; ok {
		if typ == dto.MetricType_HISTOGRAM {
			return "", fmt.Errorf("%s is a histogram: its series are %[1]s_bucket, %[1]s_sum and %[1]s_count, and the bare name selects nothing", name)
		}
		return name, nil
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		switch e.families[base] {
		case dto.MetricType_HISTOGRAM:
			return base, nil
		case dto.MetricType_SUMMARY:
			if suf != "_bucket" {
				return base, nil
			}
		}
	}
	return "", fmt.Errorf("metric %s is not exported by writermetrics (exported: %v)", name, e.names())
}

// promql is what scanPromQL found in an expression.
type promql struct {
	names  []string // series names selected
	labels []string // label names matched or grouped by
}

// functions are PromQL's functions and aggregation operators: an
// identifier before "(" must be one of them, so a metric name followed by
// a parenthesis (or a misspelt function) is an error, not a silent skip.
var functions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time
		ceil changes clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
		days_in_month deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count
		histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour
		idelta increase info irate label_join label_replace last_over_time ln log10 log2 mad_over_time
		max_over_time min_over_time minute month pi predict_linear present_over_time quantile_over_time rad
		rate resets round scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt
		stddev_over_time stdvar_over_time sum_over_time tan tanh time timestamp vector year
		sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio`) {
		functions[f] = true
	}
}

// grouping keywords take a parenthesised list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// keywords stand alone between operands.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true, "group_left": true, "group_right": true, "start": true, "end": true}

// scanPromQL lexes a PromQL expression (with Grafana's $variables) and
// returns the series names it selects and the label names it uses. It is
// a lexer, not a parser: it knows where names can stand — outside braces
// and brackets, not before "(" — and refuses what it cannot place.
func scanPromQL(expr string) (promql, error) {
	var q promql
	if strings.TrimSpace(expr) == "" {
		return q, fmt.Errorf("empty expression")
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }
	i, n := 0, len(expr)
	skipSpace := func(j int) int {
		for j < n && strings.ContainsRune(" \t\r\n", rune(expr[j])) {
			j++
		}
		return j
	}
	ident := func(j int) (string, int) {
		k := j
		for k < n && isIdent(expr[k]) {
			k++
		}
		return expr[j:k], k
	}
	str := func(j int) (string, int, error) { // expr[j] is the quote
		quote := expr[j]
		var b strings.Builder
		for k := j + 1; k < n; k++ {
			switch {
			case expr[k] == '\\' && quote != '`' && k+1 < n:
				k++
				b.WriteByte(expr[k])
			case expr[k] == quote:
				return b.String(), k + 1, nil
			default:
				b.WriteByte(expr[k])
			}
		}
		return "", n, fmt.Errorf("unterminated string in %q", expr)
	}
	variable := func(j int) int { // expr[j] is '$'
		if j+1 < n && expr[j+1] == '{' {
			if k := strings.IndexByte(expr[j:], '}'); k >= 0 {
				return j + k + 1
			}
			return n
		}
		_, k := ident(j + 1)
		return k
	}
	for i < n {
		c := expr[i]
		switch {
		case strings.ContainsRune(" \t\r\n", rune(c)):
			i++
		case c == '"' || c == '\'' || c == '`':
			_, k, err := str(i)
			if err != nil {
				return q, err
			}
			i = k
		case c == '$':
			i = variable(i)
		case c == '[':
			// A range or subquery: durations and variables, no names.
			k := strings.IndexByte(expr[i:], ']')
			if k < 0 {
				return q, fmt.Errorf("unterminated [ in %q", expr)
			}
			i += k + 1
		case c == '{':
			// Label matchers: name op "value", ...
			i++
			for {
				i = skipSpace(i)
				if i >= n {
					return q, fmt.Errorf("unterminated { in %q", expr)
				}
				if expr[i] == '}' {
					i++
					break
				}
				if expr[i] == ',' {
					i++
					continue
				}
				if !isIdentStart(expr[i]) {
					return q, fmt.Errorf("unexpected %q in label matchers of %q", expr[i], expr)
				}
				var label string
				label, i = ident(i)
				i = skipSpace(i)
				op := ""
				for i < n && strings.ContainsRune("=!~", rune(expr[i])) {
					op += string(expr[i])
					i++
				}
				i = skipSpace(i)
				if op == "" || i >= n || !strings.ContainsRune("\"'`", rune(expr[i])) {
					return q, fmt.Errorf("label %s in %q has no operator and quoted value", label, expr)
				}
				var val string
				var err error
				if val, i, err = str(i); err != nil {
					return q, err
				}
				if label == "__name__" {
					if op != "=" {
						return q, fmt.Errorf("__name__%s%q selects metrics by a pattern this test cannot check: name them", op, val)
					}
					q.names = append(q.names, val)
					continue
				}
				q.labels = append(q.labels, label)
			}
		case '0' <= c && c <= '9' || c == '.' && i+1 < n && '0' <= expr[i+1] && expr[i+1] <= '9':
			// A number or a duration (5m, 1e3, 0x1f).
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			var id string
			id, i = ident(i)
			next := skipSpace(i)
			paren := next < n && expr[next] == '('
			if functions[id] && !paren {
				// An aggregation with its grouping first: sum by (l) (…).
				if kw, _ := ident(next); kw == "by" || kw == "without" {
					continue
				}
			}
			switch {
			case grouping[id] && paren:
				k := strings.IndexByte(expr[next:], ')')
				if k < 0 {
					return q, fmt.Errorf("unterminated %s( in %q", id, expr)
				}
				for _, l := range strings.Split(expr[next+1:next+k], ",") {
					if l = strings.TrimSpace(l); l != "" {
						q.labels = append(q.labels, l)
					}
				}
				i = next + k + 1
			case paren && !keywords[id]:
				if !functions[id] {
					return q, fmt.Errorf("%s( is not a PromQL function: a misspelt function, or a metric name before a parenthesis", id)
				}
			case keywords[id] || grouping[id]:
			default:
				q.names = append(q.names, id)
			}
		default:
			// Operators and punctuation: + - * / % ^ == != <= >= < > ( ) , @
			i++
		}
	}
	return q, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestScanPromQL holds the lexer to what it must find: every selected
// series (in functions, aggregations, binary operations, by __name__) and
// no label, variable, duration or function name taken for one.
func TestScanPromQL(t *testing.T) {
	for _, c := range []struct {
		expr          string
		names, labels string
	}{
		{`histogram_quantile(0.99, sum by (le, log) (rate(a_bucket{log=~"$log", writer!="x"}[$__rate_interval])))`, "a_bucket", "le log log writer"},
		{`sum without (kind) (rate(b_total[5m] offset 1h)) / on (log) group_left (writer) c`, "b_total c", "kind log writer"},
		{`time() - min by (log) (d{log=~"${log}"}) / 262144000 > bool 1e3`, "d", "log log"},
		{`count(e == 0) or f unless {__name__="g", log="it's"}`, "e f g", "log"},
		{`max_over_time(h[1h:5m]) and  sum(i) by (job)`, "h i", "job"},
	} {
		q, err := scanPromQL(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if got := strings.Join(q.names, " "); got != c.names {
			t.Errorf("%q: names %q, want %q", c.expr, got, c.names)
		}
		if got := strings.Join(q.labels, " "); got != c.labels {
			t.Errorf("%q: labels %q, want %q", c.expr, got, c.labels)
		}
	}
}

// operationsPath is the operators' guide, whose alert rules and metric
// tables name the same metrics.
const operationsPath = "../docs/OPERATIONS.md"

// notMetrics are the redokit_ names in docs/OPERATIONS.md that are not
// metrics.
var notMetrics = map[string]bool{"redokit_apply_progress": true} // the apply's progress table

// TestOperationsDoc holds docs/OPERATIONS.md to the exported metrics as
// the dashboard is held: every alert rule's expr, and every redokit_ name
// in its text (where a histogram may go by its family name).
func TestOperationsDoc(t *testing.T) {
	ex := exported(t)
	raw, err := os.ReadFile(operationsPath)
	if err != nil {
		t.Fatal(err)
	}
	use := map[string]bool{}
	exprs := regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`).FindAllStringSubmatch(string(raw), -1)
	if len(exprs) == 0 {
		t.Fatalf("%s: no alert rule (an expr: line) found", operationsPath)
	}
	for _, m := range exprs {
		for _, p := range checkExpr(operationsPath+" alert rule", m[1], ex, use) {
			t.Error(p)
		}
	}
	for _, name := range regexp.MustCompile(`\bredokit_[a-z0-9_]+`).FindAllString(string(raw), -1) {
		if _, ok := ex.families[name]; ok || notMetrics[name] {
			continue
		}
		if _, err := ex.family(name); err != nil {
			t.Errorf("%s names %s: %v", operationsPath, name, err)
		}
	}
}
