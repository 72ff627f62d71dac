package framework

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// SumMetric returns the sum of the samples of the metric name whose labels
// contain every string of labels (e.g. `name="dsguard-coverage"`), from a
// Prometheus text exposition (what /metrics answers).
func SumMetric(exposition []byte, name string, labels ...string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("metric %s%v not served", name, labels)
	}
	return sum, nil
}
