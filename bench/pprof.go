package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// cpuProfile is the part of a pprof CPU profile the report reads: every
// sample's CPU time and its stack, innermost frame first, inlined frames
// expanded.
type cpuProfile struct {
	samples []stackSample
	total   int64 // nanoseconds
}

type stackSample struct {
	ns     int64
	frames []string
}

func readCPUProfile(path string) (*cpuProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		return nil, err
	}
	return stacks(prof)
}

// stacks flattens prof's samples into their CPU time and function names.
func stacks(prof *profile.Profile) (*cpuProfile, error) {
	cpu := slices.IndexFunc(prof.SampleType, func(t *profile.ValueType) bool {
		return t.Type == "cpu" && t.Unit == "nanoseconds"
	})
	if cpu < 0 {
		return nil, fmt.Errorf("not a CPU profile: no cpu/nanoseconds sample type in %v", prof.SampleType)
	}
	p := &cpuProfile{}
	for _, s := range prof.Sample {
		ns := s.Value[cpu]
		var frames []string
		// Locations run from the leaf outwards; within one location, the
		// lines of functions inlined into it come first.
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function != nil {
					frames = append(frames, line.Function.Name)
				}
			}
		}
		p.samples = append(p.samples, stackSample{ns: ns, frames: frames})
		p.total += ns
	}
	return p, nil
}

// layer is a part of the service a CPU sample can be charged to.
type layer struct {
	name     string
	prefixes []string
}

// layers, matched against a sample's frames from the innermost outwards:
// the first frame that belongs to a layer gets the sample. Generic
// packages (fmt, strconv, reflect, sync, bufio, internal/poll, runtime,
// syscall…) belong to none, so their time goes to whoever called them:
// allocation in GORM is GORM's, a write(2) from the MySQL driver is socket
// I/O.
var layers = []layer{
	{"request ids (crypto/rand)", []string{"crypto/rand.", "crypto/internal/sysrand.", "crypto/internal/fips140/drbg."}},
	{"RSA verification, AES-GCM (crypto/*, filippo.io/bigmod)", []string{"crypto/", "filippo.io/bigmod."}},
	{"socket I/O (net → syscalls)", []string{"net."}},
	{"service log writes (os.File → write(2))", []string{"os.(*File)."}},
	{"MySQL driver (go-sql-driver/mysql)", []string{"github.com/go-sql-driver/mysql"}},
	{"database/sql pool", []string{"database/sql."}},
	{"GORM (statement building, reflection, scanning)", []string{"gorm.io/"}},
	{"logging (log/slog)", []string{"log/slog."}},
	{"encoding/json (outbox payloads, log values, WeChat Pay bodies)", []string{"encoding/json."}},
	{"Prometheus metrics", []string{"github.com/prometheus/"}},
	{"regexp (request id, notification fields)", []string{"regexp."}},
	{"form decoding (net/url, handler.postForm)", []string{"net/url.", "paynotify/handler.postForm", "paynotify/handler.parseQuery"}},
	{"decimal (shopspring)", []string{"github.com/shopspring/decimal"}},
	{"gin (router, context, middleware)", []string{"github.com/gin-gonic/"}},
	{"net/http server (request parsing, response)", []string{"net/http.", "net/textproto.", "mime."}},
	{"Alipay SDK (smartwalle: sign content, encoding)", []string{"github.com/smartwalle/"}},
	{"WeChat Pay SDK (wechatpay-go)", []string{"github.com/wechatpay-apiv3/"}},
	{"paynotify code", []string{"paynotify/"}},
}

// runtime-only samples: charged by what the goroutine was doing.
const (
	layerGC        = "GC (background mark workers)"
	layerScheduler = "Go scheduler, netpoll, idle spin"
	layerOther     = "other"
)

// share is one line of a breakdown.
type share struct {
	name    string
	ns      int64
	inAlloc int64 // of which under runtime.mallocgc or a GC assist
	inSys   int64 // of which in a system call
}

// breakdown charges every sample to one layer.
func (p *cpuProfile) breakdown() []share {
	byName := map[string]*share{}
	get := func(name string) *share {
		s := byName[name]
		if s == nil {
			s = &share{name: name}
			byName[name] = s
		}
		return s
	}
	for _, s := range p.samples {
		name := ""
	frames:
		for _, f := range s.frames {
			for _, l := range layers {
				for _, pre := range l.prefixes {
					if strings.HasPrefix(f, pre) {
						name = l.name
						break frames
					}
				}
			}
		}
		if name == "" {
			switch {
			case hasFrame(s.frames, "runtime.gcBgMarkWorker"):
				name = layerGC
			case hasFrame(s.frames, "runtime.mcall", "runtime.schedule", "runtime.findRunnable", "runtime.netpoll", "runtime.mstart"):
				name = layerScheduler
			default:
				name = layerOther
			}
		}
		sh := get(name)
		sh.ns += s.ns
		if hasFrame(s.frames, "runtime.mallocgc", "runtime.gcAssistAlloc") {
			sh.inAlloc += s.ns
		}
		if hasPrefix(s.frames, "syscall.", "internal/runtime/syscall.") {
			sh.inSys += s.ns
		}
	}
	out := make([]share, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b share) int { return int(b.ns - a.ns) })
	return out
}

// cumulative is the share of samples with a frame starting with any of
// prefixes on the stack.
func (p *cpuProfile) cumulative(prefixes ...string) int64 {
	var ns int64
	for _, s := range p.samples {
		if hasPrefix(s.frames, prefixes...) {
			ns += s.ns
		}
	}
	return ns
}

// flat is the top functions by time spent in them (innermost frame).
func (p *cpuProfile) flat(top int) []share {
	by := map[string]int64{}
	for _, s := range p.samples {
		if len(s.frames) > 0 {
			by[s.frames[0]] += s.ns
		}
	}
	out := make([]share, 0, len(by))
	for name, ns := range by {
		out = append(out, share{name: name, ns: ns})
	}
	slices.SortFunc(out, func(a, b share) int {
		if a.ns != b.ns {
			return int(b.ns - a.ns)
		}
		return strings.Compare(a.name, b.name)
	})
	return out[:min(top, len(out))]
}

func hasFrame(frames []string, names ...string) bool {
	for _, f := range frames {
		if slices.Contains(names, f) {
			return true
		}
	}
	return false
}

func hasPrefix(frames []string, prefixes ...string) bool {
	for _, f := range frames {
		for _, p := range prefixes {
			if strings.HasPrefix(f, p) {
				return true
			}
		}
	}
	return false
}

// pct formats part of total as a percentage.
func pct(part, total int64) string {
	if total == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(total))
}
