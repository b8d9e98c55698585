package handler

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// jsonContentType is the Content-Type of every JSON answer.
const jsonContentType = "application/json; charset=utf-8"

// writeJSON is how every JSON answer is written. HTML characters are not
// escaped: a pay_url's "&" stays "&" (not "\u0026"), so a URL copied from
// curl's output opens in a browser. The answers are never embedded in HTML.
func writeJSON(c *gin.Context, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Our own views always encode; this is a bug, not the client's.
		logger(c).Error("encode answer", "err", err)
		c.Data(http.StatusInternalServerError, jsonContentType, []byte(`{"error":{"code":"internal","message":"internal error"}}`+"\n"))
		return
	}
	c.Data(status, jsonContentType, b.Bytes())
}
