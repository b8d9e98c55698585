package alipay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/model"
)

// Outbound calls. Each turns smartwalle's answer into model terms:
//   - a signed success (code 10000) is the result;
//   - a signed failure — which smartwalle returns with err == nil — is
//     model.ErrTradeNotExist, model.ErrTradeStatus or model.ErrGatewayRefused;
//   - anything else (timeout, network, bad response, and an unsigned
//     error_response, which smartwalle hands back unverified) is
//     model.ErrGatewayUnknown: nobody we trust said what happened.

// PagePayURL builds a signed page-pay URL (PC). No network. Alipay takes
// no payment for the trade after expireAt.
func (c *Client) PagePayURL(outTradeNo, subject string, amount decimal.Decimal, expireAt time.Time, notifyURL, returnURL string) (string, error) {
	u, err := c.sdk.TradePagePay(smartwalle.TradePagePay{Trade: c.trade(outTradeNo, subject, amount, expireAt, notifyURL, returnURL, "FAST_INSTANT_TRADE_PAY")})
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// WapPayURL builds a signed WAP pay URL (phone browsers). No network.
func (c *Client) WapPayURL(outTradeNo, subject string, amount decimal.Decimal, expireAt time.Time, notifyURL, returnURL string) (string, error) {
	u, err := c.sdk.TradeWapPay(smartwalle.TradeWapPay{
		Trade: c.trade(outTradeNo, subject, amount, expireAt, notifyURL, returnURL, "QUICK_WAP_WAY"),
		// The WAP API's own time_expire is to the minute; round down.
		TimeExpire: expireAt.In(model.Beijing).Format("2006-01-02 15:04"),
	})
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

func (c *Client) trade(outTradeNo, subject string, amount decimal.Decimal, expireAt time.Time, notifyURL, returnURL, product string) smartwalle.Trade {
	return smartwalle.Trade{
		NotifyURL: notifyURL, ReturnURL: returnURL, Subject: subject, OutTradeNo: outTradeNo,
		TotalAmount: amount.StringFixed(2), ProductCode: product,
		TimeExpire: FormatTime(expireAt),
	}
}

// Precreate asks Alipay for a QR code to pay a trade
// (alipay.trade.precreate). Alipay answers the same code for the same
// out_trade_no and amount, so a retry is safe.
func (c *Client) Precreate(ctx context.Context, outTradeNo, subject string, amount decimal.Decimal, expireAt time.Time, notifyURL string) (string, error) {
	rsp, err := c.sdk.TradePreCreate(ctx, smartwalle.TradePreCreate{Trade: c.trade(outTradeNo, subject, amount, expireAt, notifyURL, "", "FACE_TO_FACE_PAYMENT")})
	if err := outcome("precreate", rsp, err); err != nil {
		return "", err
	}
	return rsp.QRCode, nil
}

// QueryTrade asks Alipay where a trade stands (alipay.trade.query).
func (c *Client) QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error) {
	rsp, err := c.sdk.TradeQuery(ctx, smartwalle.TradeQuery{OutTradeNo: outTradeNo})
	if err := outcome("query", rsp, err); err != nil {
		return model.Trade{}, err
	}
	t := model.Trade{Provider: model.ProviderAlipay, OutTradeNo: rsp.OutTradeNo, TradeNo: rsp.TradeNo}
	if t.OutTradeNo != outTradeNo {
		return model.Trade{}, fmt.Errorf("%w: alipay query for %q answered %q", model.ErrGatewayUnknown, outTradeNo, t.OutTradeNo)
	}
	if t.Status, err = TradeStatus(rsp.TradeStatus).State(); err != nil {
		return model.Trade{}, fmt.Errorf("%w: alipay query for %q: %v", model.ErrGatewayUnknown, outTradeNo, err)
	}
	if t.Status.Paid() {
		if t.Amount, err = model.ParseAmount(rsp.TotalAmount); err != nil {
			return model.Trade{}, fmt.Errorf("%w: alipay query: total_amount: %v", model.ErrGatewayUnknown, err)
		}
		if rsp.SendPayDate != "" {
			if at, err := time.ParseInLocation("2006-01-02 15:04:05", rsp.SendPayDate, model.Beijing); err == nil {
				at = at.UTC()
				t.PaidAt = &at
			}
		}
	}
	return t, nil
}

// CloseTrade closes an unpaid trade (alipay.trade.close).
func (c *Client) CloseTrade(ctx context.Context, outTradeNo string) error {
	rsp, err := c.sdk.TradeClose(ctx, smartwalle.TradeClose{OutTradeNo: outTradeNo})
	return outcome("close", rsp, err)
}

// Refund asks Alipay to refund amount of the trade tradeNo (Alipay's own
// number: exactly the money that moved) under outRequestNo
// (alipay.trade.refund). Alipay refunds an out_request_no once, however
// often it is asked.
func (c *Client) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	rsp, err := c.sdk.TradeRefund(ctx, smartwalle.TradeRefund{
		TradeNo: tradeNo, OutRequestNo: outRequestNo, RefundAmount: amount.StringFixed(2), RefundReason: reason,
	})
	if err := outcome("refund", rsp, err); err != nil {
		return err
	}
	if rsp.FundChange == "Y" {
		return nil
	}
	// fund_change N: no money moved by this call — Alipay's answer to a
	// repeat of a refund already made, or to one it did not make. Only the
	// refund query tells which.
	done, err := c.RefundDone(ctx, tradeNo, outRequestNo, amount)
	if err != nil {
		// The refund call itself succeeded: whatever the query said, the
		// outcome is unknown, never a refusal.
		return fmt.Errorf("%w: alipay refund %s: fund_change N, then %v", model.ErrGatewayUnknown, outRequestNo, err)
	}
	if !done {
		return fmt.Errorf("%w: alipay refund %s: fund_change N and no successful refund found", model.ErrGatewayUnknown, outRequestNo)
	}
	return nil
}

// RefundDone asks Alipay whether the refund outRequestNo of amount went
// through (alipay.trade.fastpay.refund.query): true with REFUND_SUCCESS —
// or, as older versions of the API answer, with no refund_status but the
// refund's amount; false when Alipay reports no such refund.
func (c *Client) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	rsp, err := c.sdk.TradeFastPayRefundQuery(ctx, smartwalle.TradeFastPayRefundQuery{TradeNo: tradeNo, OutRequestNo: outRequestNo})
	if err := outcome("refund query", rsp, err); err != nil {
		return false, err
	}
	switch {
	case rsp.RefundStatus == "REFUND_SUCCESS":
		return true, nil
	case rsp.RefundStatus == "" && rsp.RefundAmount != "":
		got, err := decimal.NewFromString(rsp.RefundAmount)
		if err == nil && got.Equal(amount) {
			return true, nil
		}
		return false, fmt.Errorf("%w: alipay refund query %s: no status, amount %q", model.ErrGatewayUnknown, outRequestNo, rsp.RefundAmount)
	}
	return false, nil
}

// outcome sorts an answer into success, signed failure, or unknown.
func outcome(call string, rsp any, err error) error {
	if err != nil {
		// Includes *smartwalle.Error from an unsigned error_response:
		// smartwalle did not verify it, so neither do we trust it.
		return fmt.Errorf("%w: alipay %s: %v", model.ErrGatewayUnknown, call, err)
	}
	e := errorOf(rsp)
	if e == nil {
		return fmt.Errorf("%w: alipay %s: empty answer", model.ErrGatewayUnknown, call)
	}
	if e.Code.IsSuccess() {
		return nil
	}
	var kind error = model.ErrGatewayRefused
	if e.Code == "20000" || strings.HasPrefix(e.SubCode, "isp.") || strings.HasPrefix(e.SubCode, "aop.") {
		// Alipay's "service unavailable" family: try again, same request.
		return fmt.Errorf("%w: alipay %s: %s %s %s", model.ErrGatewayUnknown, call, e.Code, e.SubCode, e.SubMsg)
	}
	switch e.SubCode {
	case "ACQ.TRADE_NOT_EXIST":
		kind = model.ErrTradeNotExist
	case "ACQ.TRADE_STATUS_ERROR", "ACQ.TRADE_HAS_SUCCESS", "ACQ.TRADE_HAS_FINISHED", "ACQ.TRADE_HAS_CLOSE":
		kind = model.ErrTradeStatus
	case "ACQ.SYSTEM_ERROR", "ACQ.AQC.SYSTEM_ERROR", "aop.ACQ.SYSTEM_ERROR":
		kind = model.ErrGatewayUnknown // Alipay's own word: try again
	}
	return fmt.Errorf("%w: alipay %s: %s %s %s", kind, call, e.Code, e.SubCode, e.SubMsg)
}

// errorOf finds the embedded smartwalle.Error of a response (nil for a
// nil response).
func errorOf(rsp any) *smartwalle.Error {
	switch r := rsp.(type) {
	case *smartwalle.TradePreCreateRsp:
		if r != nil {
			return &r.Error
		}
	case *smartwalle.TradeQueryRsp:
		if r != nil {
			return &r.Error
		}
	case *smartwalle.TradeCloseRsp:
		if r != nil {
			return &r.Error
		}
	case *smartwalle.TradeRefundRsp:
		if r != nil {
			return &r.Error
		}
	case *smartwalle.TradeFastPayRefundQueryRsp:
		if r != nil {
			return &r.Error
		}
	case *smartwalle.BillDownloadURLQueryRsp:
		if r != nil {
			return &r.Error
		}
	}
	return nil
}
