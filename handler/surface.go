package handler

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// refuse answers a request that no handler of its surface answered (no
// route, a wrong method, a panic) in that surface's own shape: the JSON
// error of the APIs, WeChat Pay's {"code":"FAIL"}, Alipay's "failure";
// anything else (the probes, /metrics) in plain text.
func refuse(c *gin.Context, status int, code, msg string) {
	p := c.Request.URL.Path
	switch {
	case under(p, "/api") || under(p, "/admin"):
		writeAPIError(c, status, code, msg)
	case under(p, "/wechatpay"):
		writeWeChatFail(c, status, msg)
	case under(p, "/alipay"):
		writeAlipay(c, status, answerFailure)
	default:
		c.Abort()
		c.Data(status, "text/plain; charset=utf-8", []byte(msg+"\n"))
	}
}

// under reports whether path is prefix or below it.
func under(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// The codes of the two answers written outside the error table.
const (
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
)

// noRoute answers a path no route has.
func noRoute(c *gin.Context) {
	refuse(c, http.StatusNotFound, codeNotFound, "no such path")
}

// noMethod answers a path served for other methods; gin has set Allow.
func noMethod(c *gin.Context) {
	refuse(c, http.StatusMethodNotAllowed, codeMethodNotAllowed, c.Request.Method+" is not allowed here; Allow: "+c.Writer.Header().Get("Allow"))
}
