package framework

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series says which labels the series a query reads carry.
type Series struct {
	// Exported maps a metric name to the labels its series carry as the
	// exporter serves them (ExportedLabels).
	Exported map[string][]string
	// Target are the labels the scrape adds to every series of the target
	// (job, namespace, pod, ...). A matcher may select on them; a grouping
	// may not: each is one value per replica, and namespace, the release's
	// on a replica's own series, would silently stand in for a per-DaemonSet
	// series' own namespace if that series lost it.
	Target []string
}

// ExportedLabels reads a text exposition (what /metrics answers) into the
// labels of each metric as a query names it: a histogram's _bucket with le,
// its _sum and _count without, a summary's own name with quantile.
func ExportedLabels(exposition []byte) (map[string][]string, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	add := func(name string, labels map[string]bool) {
		out[name] = slices.Sorted(maps.Keys(labels))
	}
	for name, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			add(name+"_sum", labels)
			add(name+"_count", labels)
			labels["le"] = true
			add(name+"_bucket", labels)
		case dto.MetricType_SUMMARY:
			add(name+"_sum", labels)
			add(name+"_count", labels)
			labels["quantile"] = true
			add(name, labels)
		default:
			add(name, labels)
		}
	}
	return out, nil
}

// CheckQueryLabels reads a PromQL expression and returns what it groups,
// matches or selects by that the series it reads do not carry: each label
// of by and without, of on, ignoring and group_left/right, of a selector's
// matchers, the le histogram_quantile needs and label_replace's and
// label_join's source labels; and the two sides of a binary operator
// between vectors that, matching on all their labels, carry different ones
// and so never match. checked counts the labels it held against a series;
// err says the expression is not PromQL this reader knows, so that a query
// it cannot follow fails rather than passes unread.
func CheckQueryLabels(expr string, s Series) (checked int, problems []string, err error) {
	toks, err := lexPromQL(expr)
	if err != nil {
		return 0, nil, err
	}
	p := &promqlChecker{toks: toks, series: s}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(promqlError)
			if !ok {
				panic(r)
			}
			checked, problems, err = 0, nil, fmt.Errorf("%s: %s", expr, pe)
		}
	}()
	p.expr(0)
	if t := p.peek(); t.kind != tokEOF {
		p.fail("unexpected %q", t.text)
	}
	return p.checked, p.problems, nil
}

type promqlError string

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokNumber
	tokString
	tokRange // [5m], [$__rate_interval], [1h:5m]: read as one token
	tokOp
	tokLParen
	tokRParen
	tokLBrace
	tokRBrace
	tokComma
)

type token struct {
	kind tokKind
	text string // a string's value, unquoted
}

func lexPromQL(s string) ([]token, error) {
	var out []token
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isIdent(c, true):
			j := i + 1
			for j < len(s) && isIdent(s[j], false) {
				j++
			}
			out, i = append(out, token{tokIdent, s[i:j]}), j
		case '0' <= c && c <= '9' || c == '.' || c == '$':
			// A number, a duration (5m) or a Grafana variable standing
			// for one ($__interval).
			j := i + 1
			for j < len(s) && (isIdent(s[j], false) || s[j] == '.' || (s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			out, i = append(out, token{tokNumber, s[i:j]}), j
		case c == '"' || c == '\'' || c == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%s: unterminated string", s)
			}
			out, i = append(out, token{tokString, b.String()}), j+1
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("%s: unterminated [", s)
			}
			out, i = append(out, token{tokRange, s[i : i+j+1]}), i+j+1
		case c == '(' || c == ')' || c == '{' || c == '}' || c == ',':
			kind := map[byte]tokKind{'(': tokLParen, ')': tokRParen, '{': tokLBrace, '}': tokRBrace, ',': tokComma}[c]
			out, i = append(out, token{kind, string(c)}), i+1
		default:
			op := ""
			for _, o := range []string{"==", "!=", ">=", "<=", "=~", "!~", "+", "-", "*", "/", "%", "^", ">", "<", "=", "@"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("%s: unexpected %q", s, c)
			}
			out, i = append(out, token{tokOp, op}), i+len(op)
		}
	}
	return append(out, token{kind: tokEOF}), nil
}

// promqlValue is what an expression evaluates to, as far as labels go.
type promqlValue struct {
	scalar bool
	// labels are those of every series of a vector; nil when not known
	// (a metric the scrape does not hold).
	labels map[string]bool
	// what names the series for messages: a metric, or an aggregation of
	// one.
	what string
}

type promqlChecker struct {
	toks     []token
	pos      int
	series   Series
	checked  int
	problems []string
}

func (p *promqlChecker) fail(format string, args ...any) {
	panic(promqlError(fmt.Sprintf(format, args...)))
}

func (p *promqlChecker) peek() token { return p.toks[p.pos] }

func (p *promqlChecker) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *promqlChecker) expect(kind tokKind, what string) token {
	t := p.next()
	if t.kind != kind {
		p.fail("want %s, got %q", what, t.text)
	}
	return t
}

func (p *promqlChecker) problem(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); !slices.Contains(p.problems, msg) {
		p.problems = append(p.problems, msg)
	}
}

// has checks that the value's series carry label, in the named clause.
func (p *promqlChecker) has(v promqlValue, label, clause string) {
	p.checked++
	switch {
	case v.scalar:
		p.problem("%s: %s is applied to a scalar, which has no labels", clause, label)
	case v.labels == nil:
		p.problem("%s: %s is not in the scrape, so its label %s cannot be checked", clause, v.what, label)
	case !v.labels[label]:
		p.problem("%s: %s is not a label of %s (its labels: %s)", clause, label, v.what, strings.Join(slices.Sorted(maps.Keys(v.labels)), ", "))
	}
}

var binaryPrecedence = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
	"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
}

func (p *promqlChecker) binaryOp() (string, int, bool) {
	t := p.peek()
	if t.kind != tokOp && t.kind != tokIdent {
		return "", 0, false
	}
	prec, ok := binaryPrecedence[t.text]
	return t.text, prec, ok
}

func (p *promqlChecker) expr(minPrec int) promqlValue {
	lhs := p.unary()
	for {
		op, prec, ok := p.binaryOp()
		if !ok || prec < minPrec {
			return lhs
		}
		p.next()
		if p.peek().kind == tokIdent && p.peek().text == "bool" {
			p.next()
		}
		var on, ignoring, group []string
		var groupSide string
		if t := p.peek(); t.kind == tokIdent && (t.text == "on" || t.text == "ignoring") {
			p.next()
			if t.text == "on" {
				on = p.labelList()
			} else {
				ignoring = p.labelList()
			}
			if t := p.peek(); t.kind == tokIdent && (t.text == "group_left" || t.text == "group_right") {
				p.next()
				groupSide = t.text
				if p.peek().kind == tokLParen {
					group = p.labelList()
				}
			}
		}
		next := prec + 1
		if op == "^" {
			next = prec // right-associative
		}
		rhs := p.expr(next)
		lhs = p.binary(op, lhs, rhs, on, ignoring, groupSide, group)
	}
}

// binary is the value of lhs op rhs, checking how the sides match.
func (p *promqlChecker) binary(op string, lhs, rhs promqlValue, on, ignoring []string, groupSide string, group []string) promqlValue {
	switch {
	case lhs.scalar && rhs.scalar:
		return lhs
	case lhs.scalar:
		return rhs
	case rhs.scalar:
		return lhs
	}
	clause := fmt.Sprintf("%s %s %s", lhs.what, op, rhs.what)
	for _, l := range on {
		p.has(lhs, l, clause+" on")
		p.has(rhs, l, clause+" on")
	}
	for _, l := range ignoring {
		p.has(lhs, l, clause+" ignoring")
		p.has(rhs, l, clause+" ignoring")
	}
	one := rhs // the side group_left takes labels from
	if groupSide == "group_right" {
		one = lhs
	}
	for _, l := range group {
		p.has(one, l, clause+" "+groupSide)
	}
	if op == "or" {
		if lhs.labels != nil && rhs.labels != nil && maps.Equal(lhs.labels, rhs.labels) {
			return lhs
		}
		return promqlValue{what: lhs.what}
	}
	if on == nil && ignoring == nil && groupSide == "" {
		p.checked++
		switch {
		case lhs.labels == nil || rhs.labels == nil:
			p.problem("%s: the sides match on all their labels, which the scrape does not say", clause)
		case !maps.Equal(lhs.labels, rhs.labels):
			p.problem("%s: the sides match on all their labels, and carry different ones (%s; %s): no series matches",
				clause, strings.Join(slices.Sorted(maps.Keys(lhs.labels)), ", "), strings.Join(slices.Sorted(maps.Keys(rhs.labels)), ", "))
		}
		return lhs
	}
	result := lhs
	if groupSide == "group_right" {
		result = rhs
	}
	labels := map[string]bool{}
	switch {
	case result.labels == nil:
		labels = nil
	case groupSide != "":
		maps.Copy(labels, result.labels)
		for _, l := range group {
			labels[l] = true
		}
	case on != nil:
		for _, l := range on {
			labels[l] = true
		}
	default:
		maps.Copy(labels, result.labels)
		for _, l := range ignoring {
			delete(labels, l)
		}
	}
	return promqlValue{labels: labels, what: result.what}
}

func (p *promqlChecker) unary() promqlValue {
	if t := p.peek(); t.kind == tokOp && (t.text == "-" || t.text == "+") {
		p.next()
		return p.unary()
	}
	return p.postfix(p.primary())
}

// postfix reads what may follow a vector: a range, offset, @.
func (p *promqlChecker) postfix(v promqlValue) promqlValue {
	for {
		switch t := p.peek(); {
		case t.kind == tokRange:
			p.next()
		case t.kind == tokIdent && t.text == "offset":
			p.next()
			if p.peek().kind == tokOp && p.peek().text == "-" {
				p.next()
			}
			p.expect(tokNumber, "a duration after offset")
		case t.kind == tokOp && t.text == "@":
			p.next()
			if u := p.next(); u.kind == tokIdent { // start(), end()
				p.expect(tokLParen, "(")
				p.expect(tokRParen, ")")
			} else if u.kind != tokNumber {
				p.fail("want a time after @, got %q", u.text)
			}
		default:
			return v
		}
	}
}

var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// aggregationsWithParameter take a parameter before the vector.
var aggregationsWithParameter = map[string]bool{
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// keepingSeries are the aggregations that return input series, labels and
// all, by only grouping them.
var keepingSeries = map[string]bool{"bottomk": true, "topk": true, "limitk": true, "limit_ratio": true}

// labelPreserving are the functions whose result carries the labels of
// their (first) vector argument.
var labelPreserving = func() map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.Fields(`abs ceil floor round exp ln log2 log10 sqrt sgn deg rad sin cos tan asin acos atan
		sinh cosh tanh asinh acosh atanh clamp clamp_max clamp_min rate irate increase delta idelta deriv changes resets
		predict_linear holt_winters double_exponential_smoothing avg_over_time min_over_time max_over_time sum_over_time
		count_over_time stddev_over_time stdvar_over_time last_over_time present_over_time mad_over_time
		quantile_over_time sort sort_desc sort_by_label sort_by_label_desc timestamp day_of_month day_of_week
		day_of_year days_in_month hour minute month year histogram_count histogram_sum histogram_avg
		histogram_fraction histogram_stddev histogram_stdvar`) {
		out[f] = true
	}
	return out
}()

func (p *promqlChecker) primary() promqlValue {
	t := p.next()
	switch t.kind {
	case tokNumber, tokString:
		return promqlValue{scalar: true, what: t.text}
	case tokLParen:
		v := p.expr(0)
		p.expect(tokRParen, ")")
		return v
	case tokLBrace:
		return p.selector("")
	case tokIdent:
		next := p.peek()
		switch {
		case aggregations[t.text] && (next.kind == tokLParen || next.kind == tokIdent && (next.text == "by" || next.text == "without")):
			return p.aggregation(t.text)
		case next.kind == tokLParen:
			return p.call(t.text)
		case next.kind == tokLBrace:
			p.next()
			return p.selector(t.text)
		case strings.EqualFold(t.text, "inf") || strings.EqualFold(t.text, "nan"):
			return promqlValue{scalar: true, what: t.text}
		}
		return p.selectorOf(t.text, nil)
	}
	p.fail("unexpected %q", t.text)
	return promqlValue{}
}

// selector reads the matchers after "{" of the metric name (or, empty, of
// a __name__ matcher).
func (p *promqlChecker) selector(name string) promqlValue {
	var matched []string
	for p.peek().kind != tokRBrace {
		l := p.expect(tokIdent, "a label name").text
		if op := p.expect(tokOp, "a matcher"); !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) {
			p.fail("%q is not a matcher", op.text)
		}
		v := p.expect(tokString, "a label value").text
		if l == "__name__" {
			name = v
		} else {
			matched = append(matched, l)
		}
		if p.peek().kind == tokComma {
			p.next()
		}
	}
	p.next()
	if name == "" {
		p.fail("a selector without a metric name")
	}
	return p.selectorOf(name, matched)
}

func (p *promqlChecker) selectorOf(name string, matched []string) promqlValue {
	v := promqlValue{what: name}
	if labels, ok := p.series.Exported[name]; ok {
		v.labels = map[string]bool{}
		for _, l := range labels {
			v.labels[l] = true
		}
	}
	for _, l := range matched {
		if slices.Contains(p.series.Target, l) {
			p.checked++
			continue
		}
		p.has(v, l, name+"{"+l+"}")
	}
	return v
}

// labelList reads "(a, b)".
func (p *promqlChecker) labelList() []string {
	p.expect(tokLParen, "(")
	out := []string{}
	for p.peek().kind != tokRParen {
		out = append(out, p.expect(tokIdent, "a label name").text)
		if p.peek().kind == tokComma {
			p.next()
		}
	}
	p.next()
	return out
}

// args reads "(x, y, ...)".
func (p *promqlChecker) args() []promqlValue {
	p.expect(tokLParen, "(")
	var out []promqlValue
	for p.peek().kind != tokRParen {
		out = append(out, p.expr(0))
		if p.peek().kind != tokComma {
			break
		}
		p.next()
	}
	p.expect(tokRParen, ")")
	return out
}

func (p *promqlChecker) aggregation(op string) promqlValue {
	clause, labels := "", []string(nil)
	readGrouping := func() {
		if t := p.peek(); t.kind == tokIdent && (t.text == "by" || t.text == "without") {
			p.next()
			clause, labels = t.text, p.labelList()
		}
	}
	readGrouping()
	args := p.args()
	if clause == "" {
		readGrouping()
	}
	want := 1
	if aggregationsWithParameter[op] {
		want = 2
	}
	if len(args) != want {
		p.fail("%s takes %d arguments, not %d", op, want, len(args))
	}
	v := args[want-1]
	if v.scalar {
		p.fail("%s of a scalar", op)
	}
	what := op + "(" + v.what + ")"
	if clause != "" {
		what = fmt.Sprintf("%s %s (%s) (%s)", op, clause, strings.Join(labels, ", "), v.what)
	}
	for _, l := range labels {
		p.has(v, l, what)
	}
	result := promqlValue{what: what, labels: map[string]bool{}}
	switch {
	case keepingSeries[op]:
		result.labels = v.labels
	case clause == "by":
		for _, l := range labels {
			result.labels[l] = true
		}
	case clause == "without" && v.labels == nil:
		result.labels = nil
	case clause == "without":
		maps.Copy(result.labels, v.labels)
		for _, l := range labels {
			delete(result.labels, l)
		}
	}
	if op == "count_values" && result.labels != nil {
		result.labels[args[0].what] = true
	}
	return result
}

func (p *promqlChecker) call(name string) promqlValue {
	args := p.args()
	vector := promqlValue{scalar: true}
	for _, a := range args {
		if !a.scalar {
			vector = a
			break
		}
	}
	switch {
	case name == "time" || name == "pi" || name == "scalar":
		return promqlValue{scalar: true, what: name + "()"}
	case name == "vector":
		return promqlValue{labels: map[string]bool{}, what: "vector()"}
	case name == "histogram_quantile":
		if len(args) != 2 {
			p.fail("histogram_quantile takes 2 arguments")
		}
		p.has(args[1], "le", "histogram_quantile")
		out := promqlValue{what: args[1].what}
		if args[1].labels != nil {
			out.labels = maps.Clone(args[1].labels)
			delete(out.labels, "le")
		}
		return out
	case name == "label_replace" || name == "label_join":
		if len(args) < 3 {
			p.fail("%s takes at least 3 arguments", name)
		}
		var sources []string
		if name == "label_replace" && len(args) == 5 {
			sources = []string{args[3].what}
		} else if name == "label_join" {
			for _, a := range args[3:] {
				sources = append(sources, a.what)
			}
		}
		for _, l := range sources {
			if l != "" {
				p.has(args[0], l, name)
			}
		}
		out := promqlValue{what: args[0].what}
		if args[0].labels != nil {
			out.labels = maps.Clone(args[0].labels)
			out.labels[args[1].what] = true
		}
		return out
	case labelPreserving[name]:
		return vector
	}
	p.fail("the function %s is not one this reader knows the labels of", name)
	return promqlValue{}
}
