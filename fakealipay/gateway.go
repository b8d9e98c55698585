package fakealipay

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Gateway methods the fake serves.
const (
	MethodPrecreate   = "alipay.trade.precreate"
	MethodPagePay     = "alipay.trade.page.pay"
	MethodWapPay      = "alipay.trade.wap.pay"
	MethodQuery       = "alipay.trade.query"
	MethodClose       = "alipay.trade.close"
	MethodRefund      = "alipay.trade.refund"
	MethodRefundQuery = "alipay.trade.fastpay.refund.query"
)

// call is one gateway call, parsed.
type call struct {
	method string
	form   url.Values
	biz    struct {
		OutTradeNo   string `json:"out_trade_no"`
		TradeNo      string `json:"trade_no"`
		Subject      string `json:"subject"`
		TotalAmount  string `json:"total_amount"`
		RefundAmount string `json:"refund_amount"`
		OutRequestNo string `json:"out_request_no"`
		BillType     string `json:"bill_type"`
		BillDate     string `json:"bill_date"`
	}
	// base is this fake's URL as the caller reached it, ending in "/".
	base string
	// app is the app that made the call (authenticate).
	app *app
}

// result is the status part of every answer; smartwalle reads it into its
// Error, embedded in every response type.
type result struct {
	Code    string `json:"code"`
	Msg     string `json:"msg"`
	SubCode string `json:"sub_code,omitempty"`
	SubMsg  string `json:"sub_msg,omitempty"`
}

// success is the result of a call that did what it was asked.
var success = result{Code: "10000", Msg: "Success"}

// gateway serves /gateway.do.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "fakealipay: unreadable form", http.StatusBadRequest)
		return
	}
	c := &call{method: r.Form.Get("method"), form: r.Form, base: baseURL(r)}
	f := s.faults.Arrive(c.method)
	if f.kind == faultDrop {
		http.Error(w, "fakealipay: call dropped", http.StatusInternalServerError)
		return
	}
	switch c.method {
	case MethodPagePay, MethodWapPay:
		s.cashierOpen(w, r, c, f)
		return
	case MethodPrecreate, MethodQuery, MethodClose, MethodRefund, MethodRefundQuery, MethodBillURL:
	default:
		// Alipay answers an unknown method in error_response, unsigned:
		// smartwalle returns it as an error of type *alipay.Error.
		writeUnsigned(w, "error_response", failure("40002", "isv.invalid-method"))
		return
	}
	if ref := s.authenticate(c); ref != nil {
		if ref.signed {
			s.writeSigned(w, c.method, ref.answer)
		} else {
			writeUnsigned(w, responseKey(c.method), ref.answer)
		}
		return
	}

	var answer any
	if f.kind == faultFail {
		answer = failure(f.code, f.subCode)
	} else {
		answer = s.api(c)
	}
	if f.kind == faultTimeout {
		s.bg.Sleep(r.Context(), f.delay)
	}
	s.writeSigned(w, c.method, answer)
}

// refusal is a call refused before its method runs. Alipay does not sign
// its refusal of an app it does not know.
type refusal struct {
	answer result
	signed bool
}

// authenticate checks who is calling and decodes biz_content.
func (s *Server) authenticate(c *call) *refusal {
	a, ok := s.apps[c.form.Get("app_id")]
	if !ok {
		return &refusal{answer: failure("40002", "isv.invalid-app-id")}
	}
	c.app = a
	// Each app's calls are checked with that app's key: a call naming one
	// app signed with another's key is refused.
	if a.key != nil && (c.form.Get("sign_type") != "RSA2" || !verifyCall(a.key, c.form)) {
		return &refusal{answer: failure("40002", "isv.invalid-signature"), signed: true}
	}
	if biz := c.form.Get("biz_content"); biz != "" {
		if err := json.Unmarshal([]byte(biz), &c.biz); err != nil {
			return &refusal{answer: failure("40002", "isv.invalid-parameter"), signed: true}
		}
	}
	return nil
}

// api does what a JSON method asks and returns its answer object.
func (s *Server) api(c *call) any {
	var answer any
	var err error
	switch c.method {
	case MethodPrecreate:
		answer, err = s.precreate(c)
	case MethodQuery:
		answer, err = s.query(c)
	case MethodClose:
		answer, err = s.closeCall(c)
	case MethodRefund:
		answer, err = s.refundCall(c)
	case MethodRefundQuery:
		answer, err = s.refundQuery(c)
	case MethodBillURL:
		answer, err = s.billURL(c)
	}
	if err != nil {
		return failureOf(err)
	}
	return answer
}

// responseKey is where Alipay puts the answer to method.
func responseKey(method string) string {
	return strings.ReplaceAll(method, ".", "_") + "_response"
}

// writeSigned writes answer signed as Alipay signs: RSA2 over the exact
// bytes of the answer object as they appear in the body.
func (s *Server) writeSigned(w http.ResponseWriter, method string, answer any) {
	obj, err := json.Marshal(answer)
	if err == nil {
		var sig string
		if sig, err = s.sign(obj); err == nil {
			writeRaw(w, responseKey(method), obj, sig)
			return
		}
	}
	http.Error(w, "fakealipay: "+err.Error(), http.StatusInternalServerError)
}

// writeUnsigned writes answer under key with no sign, as Alipay answers
// callers it cannot or will not sign for.
func writeUnsigned(w http.ResponseWriter, key string, answer result) {
	obj, _ := json.Marshal(answer) // a result always marshals
	writeRaw(w, key, obj, "")
}

// writeRaw writes {"<key>":<obj>,"sign":"<sig>"}, the sign left out if sig
// is "". smartwalle takes the object's bytes verbatim from the body, and
// the sign's between its quotes without unescaping them.
func writeRaw(w http.ResponseWriter, key string, obj []byte, sig string) {
	var b bytes.Buffer
	k, _ := json.Marshal(key)
	b.WriteString("{")
	b.Write(k)
	b.WriteString(":")
	b.Write(obj)
	if sig != "" {
		b.WriteString(`,"sign":"` + sig + `"`)
	}
	b.WriteString("}")
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.Write(b.Bytes())
}

// subCodes maps the fake's errors to Alipay's sub_code, all with code 40004.
var subCodes = []struct {
	err     error
	subCode string
}{
	{ErrTradeNotExist, "ACQ.TRADE_NOT_EXIST"},
	{ErrTradeStatus, "ACQ.TRADE_STATUS_ERROR"},
	{errTradeHasSuccess, "ACQ.TRADE_HAS_SUCCESS"},
	{errTradeHasClose, "ACQ.TRADE_HAS_CLOSE"},
	{errContextInconsistent, "ACQ.CONTEXT_INCONSISTENT"},
	{errRefundAmount, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"},
	{errInvalidParameter, "ACQ.INVALID_PARAMETER"},
}

// failureOf is Alipay's answer to err.
func failureOf(err error) result {
	for _, sc := range subCodes {
		if errors.Is(err, sc.err) {
			return failure("40004", sc.subCode)
		}
	}
	return failure("40004", "ACQ.SYSTEM_ERROR")
}

// failure is an answer with code and subCode, worded as Alipay words them.
func failure(code, subCode string) result {
	msg, ok := codeMsgs[code]
	if !ok {
		msg = "Unknown Error"
	}
	subMsg, ok := subMsgs[subCode]
	if !ok {
		subMsg = subCode
	}
	return result{Code: code, Msg: msg, SubCode: subCode, SubMsg: subMsg}
}

// subMsgs is Alipay's sub_msg for the sub_codes the fake answers.
var subMsgs = map[string]string{
	"ACQ.TRADE_NOT_EXIST":            "交易不存在",
	"ACQ.TRADE_STATUS_ERROR":         "交易状态不合法",
	"ACQ.TRADE_HAS_SUCCESS":          "交易已被支付",
	"ACQ.TRADE_HAS_CLOSE":            "交易已经关闭",
	"ACQ.CONTEXT_INCONSISTENT":       "交易信息被篡改",
	"ACQ.REFUND_AMT_NOT_EQUAL_TOTAL": "退款金额超限",
	"ACQ.INVALID_PARAMETER":          "参数无效",
	"ACQ.SYSTEM_ERROR":               "系统错误",
	"isv.invalid-method":             "不存在的方法名",
	"isv.invalid-app-id":             "无效的AppID参数",
	"isv.invalid-signature":          "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配",
	"isv.invalid-parameter":          "参数无效",
	"isp.bill_not_exist":             "账单不存在",
	"isv.invalid-bill-type":          "账单类型不正确",
	"isv.invalid-bill-date":          "账单时间格式不正确",
}

// codeMsgs is Alipay's msg for each public code.
var codeMsgs = map[string]string{
	"10000": "Success",
	"20000": "Service Currently Unavailable",
	"20001": "Insufficient Token Permissions",
	"40001": "Missing Required Arguments",
	"40002": "Invalid Arguments",
	"40003": "Insufficient Conditions",
	"40004": "Business Failed",
	"40005": "Call Limited",
	"40006": "Insufficient Permissions",
}

// baseURL is the fake's root as the caller reached it, ending in "/". It
// reads the request line, not r.URL, so that it survives http.StripPrefix.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	p := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		p = u.Path
	}
	dir := path.Dir(p)
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	return scheme + "://" + r.Host + dir
}
