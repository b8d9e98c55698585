package fakealipay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/model"
)

// Errors of the buyer's and the merchant's actions. The gateway answers
// each with the Alipay sub_code in subCodes.
var (
	// ErrTradeNotExist: no trade has that out_trade_no or trade_no.
	ErrTradeNotExist = errors.New("fakealipay: trade does not exist")
	// ErrTradeStatus: the trade's status does not allow the action (paying
	// a closed trade, closing a paid one, refunding an unpaid one).
	ErrTradeStatus = errors.New("fakealipay: trade status does not allow this")

	errTradeHasSuccess     = errors.New("trade already paid")
	errTradeHasClose       = errors.New("trade already closed")
	errContextInconsistent = errors.New("same number, different content")
	errRefundAmount        = errors.New("refund exceeds what is left of the payment")
	errInvalidParameter    = errors.New("invalid parameter")
)

// The buyer every trade is paid by.
const (
	buyerID      = "2088102000000001"
	buyerLogonID = "dev***@example.com"
)

// Trade is one trade as the fake Alipay holds it.
type Trade struct {
	OutTradeNo  string
	TradeNo     string // 28 digits, like Alipay's
	Subject     string
	TotalAmount decimal.Decimal
	Status      alipay.TradeStatus
	// Method is the gateway method that created the trade.
	Method string
	// AppID and SellerID are the app that opened the trade and its seller:
	// only that app's calls find it, and its notifications name both.
	AppID, SellerID string
	// NotifyURL receives the trade's notifications; ReturnURL is where the
	// cashier sends the buyer back.
	NotifyURL, ReturnURL string
	Created              time.Time
	Paid                 time.Time // zero until paid
	Closed               time.Time // zero until closed
	Refunds              []Refund  // in order
}

// Refund is one accepted refund request.
type Refund struct {
	// AppID is the app whose call (signed with its key) asked for it.
	AppID        string
	OutRequestNo string
	Amount       decimal.Decimal
	At           time.Time
}

// Refunded is the sum of the trade's refunds.
func (t Trade) Refunded() decimal.Decimal {
	sum := decimal.Zero
	for _, r := range t.Refunds {
		sum = sum.Add(r.Amount)
	}
	return sum
}

// refund returns the refund recorded under outRequestNo.
func (t Trade) refund(outRequestNo string) (Refund, bool) {
	i := slices.IndexFunc(t.Refunds, func(r Refund) bool { return r.OutRequestNo == outRequestNo })
	if i < 0 {
		return Refund{}, false
	}
	return t.Refunds[i], true
}

// snapshot is a copy the caller may keep after the lock is released.
func (t *Trade) snapshot() Trade {
	c := *t
	c.Refunds = slices.Clone(t.Refunds)
	return c
}

// Trade returns the trade under outTradeNo.
func (s *Server) Trade(outTradeNo string) (Trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byOut[outTradeNo]
	if !ok {
		return Trade{}, false
	}
	return t.snapshot(), true
}

// order is what a creating call asks for.
type order struct {
	outTradeNo, subject  string
	amount               decimal.Decimal
	notifyURL, returnURL string
	method               string
	// app opened it.
	app *app
}

// create opens a WAIT_BUYER_PAY trade, or returns the one already under
// that out_trade_no if it is for the same amount. A paid or closed trade
// comes back with errTradeHasSuccess or errTradeHasClose.
func (s *Server) create(o order) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.byOut[o.outTradeNo]; ok {
		switch {
		case !t.TotalAmount.Equal(o.amount):
			return Trade{}, errContextInconsistent
		case t.Status.Paid():
			return t.snapshot(), errTradeHasSuccess
		case t.Status == alipay.TradeClosed:
			return t.snapshot(), errTradeHasClose
		}
		return t.snapshot(), nil
	}
	now := s.now()
	t := &Trade{
		OutTradeNo:  o.outTradeNo,
		TradeNo:     s.newTradeNo(now),
		Subject:     o.subject,
		TotalAmount: o.amount,
		Status:      alipay.TradeWaitBuyerPay,
		Method:      o.method,
		AppID:       o.app.id,
		SellerID:    o.app.seller,
		NotifyURL:   o.notifyURL,
		ReturnURL:   o.returnURL,
		Created:     now,
	}
	if t.NotifyURL == "" {
		t.NotifyURL = s.cfg.NotifyURL
	}
	s.byOut[t.OutTradeNo] = t
	s.byNo[t.TradeNo] = t
	return t.snapshot(), nil
}

// newTradeNo is a fresh trade_no shaped like Alipay's: the Beijing date,
// "22001", 15 digits. The caller holds s.mu.
func (s *Server) newTradeNo(now time.Time) string {
	for {
		no := fmt.Sprintf("%s22001%015d", now.In(model.Beijing).Format("20060102"), rand.Int64N(1e15))
		if _, taken := s.byNo[no]; !taken {
			return no
		}
	}
}

// find returns the trade named by either number; both, if given, must name
// the same trade. appID, if given, must be the trade's app: another app's
// trade does not exist for it. The caller holds s.mu.
func (s *Server) find(appID, outTradeNo, tradeNo string) (*Trade, error) {
	var t *Trade
	switch {
	case outTradeNo != "":
		t = s.byOut[outTradeNo]
	case tradeNo != "":
		t = s.byNo[tradeNo]
	default:
		return nil, errInvalidParameter
	}
	if t == nil || (tradeNo != "" && t.TradeNo != tradeNo) || (appID != "" && t.AppID != appID) {
		return nil, ErrTradeNotExist
	}
	return t, nil
}

// lookup returns a copy of the trade named by either number.
func (s *Server) lookup(appID, outTradeNo, tradeNo string) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(appID, outTradeNo, tradeNo)
	if err != nil {
		return Trade{}, err
	}
	return t.snapshot(), nil
}

// Pay is the buyer paying: the WAIT_BUYER_PAY trade becomes TRADE_SUCCESS,
// paid now, and its notification is sent before Pay returns (unless lost
// or held). How the notification fared is in Notifications, not the error.
func (s *Server) Pay(ctx context.Context, outTradeNo string) error {
	return s.pay(ctx, outTradeNo, "")
}

// pay pays the trade named by either number.
func (s *Server) pay(ctx context.Context, outTradeNo, tradeNo string) error {
	s.mu.Lock()
	t, err := s.find("", outTradeNo, tradeNo)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if t.Status != alipay.TradeWaitBuyerPay {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrTradeStatus, t.Status)
	}
	now := s.now()
	t.Status = alipay.TradeSuccess
	t.Paid = now
	to, form := t.NotifyURL, s.tradeForm(t, now)
	s.mu.Unlock()

	s.notify(ctx, to, form)
	return nil
}

// closeTrade closes a trade nobody has paid.
func (s *Server) closeTrade(appID, outTradeNo, tradeNo string) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(appID, outTradeNo, tradeNo)
	if err != nil {
		return Trade{}, err
	}
	// As Alipay: only a trade waiting for the buyer closes; closing a closed
	// trade again is an error too.
	if t.Status != alipay.TradeWaitBuyerPay {
		return Trade{}, ErrTradeStatus
	}
	t.Status = alipay.TradeClosed
	t.Closed = s.now()
	return t.snapshot(), nil
}

// refundOutcome is what a refund call did.
type refundOutcome struct {
	trade      Trade
	refund     Refund
	fundChange bool // false: a replay of an accepted request
	notifyURL  string
	form       url.Values // the refund notification, if fundChange
}

// refundTrade refunds amount of a paid trade once per outRequestNo. A
// replay of an accepted request succeeds again without moving money; the
// same outRequestNo with another amount is refused.
func (s *Server) refundTrade(appID, outTradeNo, tradeNo, outRequestNo string, amount decimal.Decimal) (refundOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(appID, outTradeNo, tradeNo)
	if err != nil {
		return refundOutcome{}, err
	}
	if outRequestNo == "" {
		// Alipay's rule: without out_request_no, the refund is named by
		// the trade's out_trade_no.
		outRequestNo = t.OutTradeNo
	}
	if prior, ok := t.refund(outRequestNo); ok {
		if !prior.Amount.Equal(amount) {
			return refundOutcome{}, errContextInconsistent
		}
		return refundOutcome{trade: t.snapshot(), refund: prior}, nil
	}
	if !t.Status.Paid() {
		return refundOutcome{}, ErrTradeStatus
	}
	if amount.GreaterThan(t.TotalAmount.Sub(t.Refunded())) {
		return refundOutcome{}, errRefundAmount
	}
	now := s.now()
	r := Refund{AppID: appID, OutRequestNo: outRequestNo, Amount: amount, At: now}
	t.Refunds = append(t.Refunds, r)
	if t.Refunded().Equal(t.TotalAmount) {
		t.Status = alipay.TradeClosed
		t.Closed = now
	}
	return refundOutcome{
		trade:      t.snapshot(),
		refund:     r,
		fundChange: true,
		notifyURL:  t.NotifyURL,
		form:       s.refundForm(t, r, now),
	}, nil
}

// findRefund returns the trade and, if accepted, the refund under
// outRequestNo.
func (s *Server) findRefund(appID, outTradeNo, tradeNo, outRequestNo string) (Trade, Refund, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(appID, outTradeNo, tradeNo)
	if err != nil {
		return Trade{}, Refund{}, false, err
	}
	if outRequestNo == "" {
		outRequestNo = t.OutTradeNo
	}
	r, ok := t.refund(outRequestNo)
	return t.snapshot(), r, ok, nil
}

// amountPattern is Alipay's amount: yuan with at most two decimals.
var amountPattern = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,2})?$`)

// maxAmount is the largest amount Alipay accepts.
var maxAmount = decimal.NewFromInt(100_000_000)

// parseAmount reads an amount in [0.01, 100000000].
func parseAmount(s string) (decimal.Decimal, error) {
	if !amountPattern.MatchString(s) {
		return decimal.Decimal{}, errInvalidParameter
	}
	d, err := decimal.NewFromString(s)
	if err != nil || !d.IsPositive() || d.GreaterThan(maxAmount) {
		return decimal.Decimal{}, errInvalidParameter
	}
	return d, nil
}

// AddPaidTrade records a trade as already paid, without a notification:
// for trades paid "elsewhere" — dev's replay files in testdata/notify —
// that the service may later query, close or refund. An existing trade
// with that trade_no is left as it is; a second trade under one
// out_trade_no (which real Alipay would refuse) is found by trade_no only.
func (s *Server) AddPaidTrade(outTradeNo, tradeNo string, amount decimal.Decimal, paidAt time.Time) {
	s.AddPaidTradeIn(s.cfg.AppID, outTradeNo, tradeNo, amount, paidAt)
}

// AddPaidTradeIn is AddPaidTrade of app appID (one of Config.Apps, or the
// first app for an app this fake does not know): the trade is that app's
// alone, as one it opened.
func (s *Server) AddPaidTradeIn(appID, outTradeNo, tradeNo string, amount decimal.Decimal, paidAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byNo[tradeNo] != nil {
		return
	}
	a := s.apps[appID]
	if a == nil {
		a = s.apps[s.cfg.AppID]
	}
	t := &Trade{
		OutTradeNo: outTradeNo, TradeNo: tradeNo, Subject: "paid elsewhere", TotalAmount: amount,
		Status: alipay.TradeSuccess, Method: "seeded", AppID: a.id, SellerID: a.seller, Created: paidAt, Paid: paidAt,
	}
	s.byNo[tradeNo] = t
	if s.byOut[outTradeNo] == nil {
		s.byOut[outTradeNo] = t
	}
}
