package fakealipay

import "time"

// faultKind is what goes wrong with a call.
type faultKind int

const (
	faultNone    faultKind = iota
	faultFail              // answer a signed business failure, do nothing
	faultTimeout           // do the action, answer late
	faultDrop              // do nothing, answer HTTP 500
)

// fault is one misbehaviour queued for a method (fake.Faults).
type fault struct {
	kind          faultKind
	code, subCode string        // faultFail
	delay         time.Duration // faultTimeout
}

// FailNext makes the next times calls of method answer a signed failure
// with code and subCode (such as "40004", "ACQ.SYSTEM_ERROR") without
// doing anything. smartwalle returns such an answer with a nil error: the
// caller must look at Code.
func (s *Server) FailNext(method, code, subCode string, times int) {
	s.faults.Add(method, fault{kind: faultFail, code: code, subCode: subCode}, times)
}

// TimeoutNext makes the next times calls of method do their action and
// then wait d (or until the caller hangs up) before answering: the refund
// happened, but a caller with a shorter timeout never learns it.
func (s *Server) TimeoutNext(method string, d time.Duration, times int) {
	s.faults.Add(method, fault{kind: faultTimeout, delay: d}, times)
}

// DropNext makes the next times calls of method do nothing and answer
// HTTP 500 with a body that is not JSON.
func (s *Server) DropNext(method string, times int) {
	s.faults.Add(method, fault{kind: faultDrop}, times)
}

// Calls counts the calls of method received so far, faulty ones included.
func (s *Server) Calls(method string) int { return s.faults.Calls(method) }
