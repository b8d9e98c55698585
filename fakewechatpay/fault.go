package fakewechatpay

import "time"

// faultKind is what goes wrong with a call.
type faultKind int

const (
	faultNone      faultKind = iota
	faultFail                // answer a signed failure, do nothing
	faultTimeout             // do the action, answer late
	faultDrop                // do nothing, answer an unsigned HTTP 502 page
	faultForge               // do the action, answer with a bad signature
	faultForgeFail           // do the action, answer a failure with a bad signature
)

// fault is one misbehaviour queued for a call (fake.Faults).
type fault struct {
	kind   faultKind
	status int    // faultFail
	code   string // faultFail
	delay  time.Duration
}

// Calls are named "pay", "query", "close", "refund", "refund query" and
// "trade bill".

// FailNext makes the next times calls answer a signed failure: HTTP
// status with code (such as 500 "SYSTEM_ERROR", 400 "NOT_ENOUGH"),
// without doing anything.
func (s *Server) FailNext(call string, status int, code string, times int) {
	s.faults.Add(call, fault{kind: faultFail, status: status, code: code}, times)
}

// TimeoutNext makes the next times calls do their action and then wait d
// (or until the caller hangs up) before answering.
func (s *Server) TimeoutNext(call string, d time.Duration, times int) {
	s.faults.Add(call, fault{kind: faultTimeout, delay: d}, times)
}

// DropNext makes the next times calls do nothing and answer HTTP 502 with
// an unsigned HTML page, as a proxy in front of WeChat Pay would.
func (s *Server) DropNext(call string, times int) {
	s.faults.Add(call, fault{kind: faultDrop}, times)
}

// ForgeNext makes the next times calls do their action but answer with a
// signature that does not verify: an answer the merchant must not trust.
func (s *Server) ForgeNext(call string, times int) {
	s.faults.Add(call, fault{kind: faultForge}, times)
}

// ForgeFailNext makes the next times calls do their action but answer
// HTTP status with code (such as 403 "NOT_ENOUGH") under a signature that
// does not verify: a failure anyone on the path could have written, so the
// outcome is unknown to the merchant.
func (s *Server) ForgeFailNext(call string, status int, code string, times int) {
	s.faults.Add(call, fault{kind: faultForgeFail, status: status, code: code}, times)
}

// Calls counts the calls received so far, faulty ones included.
func (s *Server) Calls(call string) int { return s.faults.Calls(call) }
