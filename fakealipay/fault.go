package fakealipay

import (
	"context"
	"time"
)

// faultKind is what goes wrong with a call.
type faultKind int

const (
	faultNone    faultKind = iota
	faultFail              // answer a signed business failure, do nothing
	faultTimeout           // do the action, answer late
	faultDrop              // do nothing, answer HTTP 500
)

// fault is one queued misbehaviour, for the next left calls of a method.
type fault struct {
	kind          faultKind
	code, subCode string        // faultFail
	delay         time.Duration // faultTimeout
	left          int
}

// FailNext makes the next times calls of method answer a signed failure
// with code and subCode (such as "40004", "ACQ.SYSTEM_ERROR") without
// doing anything. smartwalle returns such an answer with a nil error: the
// caller must look at Code.
func (s *Server) FailNext(method, code, subCode string, times int) {
	s.queue(method, fault{kind: faultFail, code: code, subCode: subCode, left: times})
}

// TimeoutNext makes the next times calls of method do their action and
// then wait d (or until the caller hangs up) before answering: the refund
// happened, but a caller with a shorter timeout never learns it.
func (s *Server) TimeoutNext(method string, d time.Duration, times int) {
	s.queue(method, fault{kind: faultTimeout, delay: d, left: times})
}

// DropNext makes the next times calls of method do nothing and answer
// HTTP 500 with a body that is not JSON.
func (s *Server) DropNext(method string, times int) {
	s.queue(method, fault{kind: faultDrop, left: times})
}

// Calls counts the calls of method received so far, faulty ones included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// queue adds a fault after those already queued for method.
func (s *Server) queue(method string, f fault) {
	if f.left <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], &f)
}

// arrive counts a call of method and takes the fault it is to suffer.
func (s *Server) arrive(method string) fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	q := s.faults[method]
	if len(q) == 0 {
		return fault{}
	}
	f := *q[0]
	if q[0].left--; q[0].left == 0 {
		s.faults[method] = q[1:]
	}
	return f
}

// wait sleeps d, or less if the caller hangs up or the fake is closed.
func (s *Server) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.bg.Done():
	}
}
