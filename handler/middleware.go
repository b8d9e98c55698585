package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

const (
	requestIDHeader = "X-Request-Id"
	accessLogKey    = "paynotify.accesslog"
)

// requestID gives every request an id (the caller's X-Request-Id if sane),
// echoes it, and logs the request once it is answered.
func requestID(base *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(requestIDHeader)
		if !validRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Header(requestIDHeader, id)
		l := &accessLog{base: base, id: id}
		l.attrs = l.room[:accessLogFixed]
		c.Set(accessLogKey, l)
		start := time.Now()
		c.Next()
		// The path only: a query string is the caller's, not ours to log.
		l.attrs[0] = slog.String("request_id", id)
		l.attrs[1] = slog.String("method", c.Request.Method)
		l.attrs[2] = slog.String("path", c.Request.URL.Path)
		l.attrs[3] = slog.Int("status", c.Writer.Status())
		l.attrs[4] = slog.Int64("duration_ms", time.Since(start).Milliseconds())
		l.attrs[5] = slog.String("client", c.ClientIP())
		base.LogAttrs(c.Request.Context(), slog.LevelInfo, "http", l.attrs...)
	}
}

// validRequestID accepts a caller's id only if it is short and printable
// ([A-Za-z0-9._:-]{1,64}), so a header cannot forge log lines.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9',
			b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// accessLogFixed is the number of attributes the middleware itself puts
// first on the access-log line (request_id, method, path, status,
// duration_ms, and client: gin's ClientIP under TRUSTED_PROXIES).
const accessLogFixed = 6

// accessLog is one request's log: the attributes of its one access-log
// line, and a logger carrying its id for any other line. Every request
// pays for the first and few for the second, so the logger is made only
// when asked for, and the attributes fill a fixed array before they need
// the heap.
type accessLog struct {
	base  *slog.Logger
	id    string
	log   *slog.Logger // base with request_id, once logger asked for it
	attrs []slog.Attr
	room  [accessLogFixed + 11]slog.Attr
}

// logAlso adds attributes to the request's one access-log line, so a
// handler's outcome costs no line of its own.
func logAlso(c *gin.Context, attrs ...slog.Attr) {
	if l, ok := c.Get(accessLogKey); ok {
		l := l.(*accessLog)
		l.attrs = append(l.attrs, attrs...)
	}
}

// logger is the request's logger, carrying its id.
func logger(c *gin.Context) *slog.Logger {
	v, ok := c.Get(accessLogKey)
	if !ok {
		return slog.Default()
	}
	l := v.(*accessLog)
	if l.log == nil {
		l.log = l.base.With("request_id", l.id)
	}
	return l.log
}

// withClientAddr hands a mounted net/http handler (the console) the
// client address gin worked out under TRUSTED_PROXIES, so it limits and
// logs the same client the access log names.
func withClientAddr(c *gin.Context) {
	c.Request = c.Request.WithContext(model.WithClientAddr(c.Request.Context(), c.ClientIP()))
	c.Next()
}

// recovery turns a panic into one log line and a 500 in the surface's
// shape (refuse), unless the handler had already answered.
func recovery() gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		logger(c).Error("panic", "panic", rec)
		if c.Writer.Written() {
			c.Abort()
			return
		}
		refuse(c, http.StatusInternalServerError, "internal", "internal error")
	})
}

// deadline bounds everything a request does by d: every database wait,
// COMMIT included, ends with the request's context, so past d the client
// is answered 503 instead of left waiting.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}
