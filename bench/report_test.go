package main

import (
	"strings"
	"testing"
	"time"
)

// With -galera, the headline has the cluster's first notices against one
// server's, judged by the target, and its duplicates beside.
func TestHeadlineGalera(t *testing.T) {
	at := func(kind string, perSecond int) cell {
		return cell{level: headlineLevel, kind: kind, res: result{n: perSecond, wall: time.Second}}
	}
	r := &report{cells: []cell{
		at(kindFirst, 4000), at(kindDuplicate, 16000),
		at(kindFirst+galeraTag, 2500), at(kindDuplicate+galeraTag, 10000),
		at(kindFirst+singleTag, 5000), at(kindDuplicate+singleTag, 10000),
	}}
	var b strings.Builder
	r.writeHeadline(&b)
	for _, want := range []string{
		"| Galera first notices (3 nodes, 2 instances) | 2500 req/s | one server, 2 instances: 5000 req/s | 0.50× | ≥ 0.6× MISSED |",
		"| Galera duplicates (3 nodes, 2 instances) | 10000 req/s | one server, 2 instances: 10000 req/s | 1.00× | — |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("headline lacks %q:\n%s", want, b.String())
		}
	}
}
