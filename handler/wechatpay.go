package handler

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// weChatDeadline bounds the work on one WeChat Pay notification: WeChat
// Pay waits 5 s for the answer, then counts the notification failed.
const weChatDeadline = 4 * time.Second

// WeChatPayVerifier checks that a notification was signed by WeChat Pay
// for this merchant, decrypts it and checks what it says
// (wechatpay.Provider).
type WeChatPayVerifier interface {
	Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error)
}

// answerWeChatPay answers WeChat Pay, which reads only the HTTP status:
// 204 (no body) when recorded; 4xx/5xx with {"code":"FAIL","message":…}
// when not, and it sends again (15s, 15s, 30s, 3m, … over 24 h).
func answerWeChatPay(c *gin.Context, status int, refused error) {
	if refused == nil {
		c.Status(http.StatusNoContent)
		return
	}
	writeWeChatFail(c, status, refused.Error())
}

// writeWeChatFail answers WeChat Pay with status and {"code":"FAIL",
// "message":msg}, the one shape of every refusal on its path.
func writeWeChatFail(c *gin.Context, status int, msg string) {
	c.Abort()
	writeJSON(c, status, gin.H{"code": "FAIL", "message": msg})
}
