package handler

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/metrics"
	"paynotify/model"
)

// maxNotifyBody caps a notification body; a real one is a few KB.
const maxNotifyBody = 64 << 10

// Alipay's notify protocol: the body of the answer is exactly one of these.
const (
	answerSuccess = "success" // processed: stop resending
	answerFailure = "failure" // resend on Alipay's schedule
)

// Verifier checks that a notification form was signed by Alipay for this
// merchant and says it in the ledger's terms (alipay.Apps,
// alipay.Client): the handler reads the form, the adapter what it means.
type Verifier interface {
	ReadNotification(ctx context.Context, form url.Values) (model.Notice, error)
}

// Alipay serves Alipay's asynchronous notifications.
type Alipay struct {
	intake
	verifier Verifier
	metrics  *metrics.Metrics
	timeout  time.Duration
}

// Notify handles POST /alipay/notify. Only the form body counts: a query
// string on the notify URL is not signed.
func (a *Alipay) Notify(c *gin.Context) {
	start := time.Now()
	outcome, err := a.notify(c)
	answer, status := answerSuccess, http.StatusOK
	if err != nil {
		row := notifyRefused(c, model.ProviderAlipay, err)
		outcome, answer = row.outcome, answerFailure
		if row.err == errBodyTooLarge || row.err == errBodyTimeout {
			// Alipay reads only the word; the status is for whoever
			// sent a body no notification has.
			status = row.status
		}
		if errors.Is(err, model.ErrUnknownApp) {
			a.metrics.NotifyRefused(model.ProviderAlipay, metrics.RefusedUnknownApp)
		}
	}
	a.metrics.Notified(model.ProviderAlipay, outcome, answer, time.Since(start))
	writeAlipay(c, status, answer)
}

// writeAlipay answers Alipay with status and answer ("success" or
// "failure"), the one shape of every answer on its path.
func writeAlipay(c *gin.Context, status int, answer string) {
	c.Abort()
	c.Data(status, "text/plain; charset=utf-8", []byte(answer))
}

func (a *Alipay) notify(c *gin.Context) (string, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.timeout)
	defer cancel()

	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxNotifyBody)
	form, err := postForm(c.Request)
	if err != nil {
		return "", bodyError(err)
	}
	n, err := a.verifier.ReadNotification(ctx, form)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("notify_id", n.ID), slog.String("trade_status", n.Status))
	return a.take(ctx, c, model.ProviderAlipay, n)
}

// postForm is what (*http.Request).ParseForm puts in PostForm, refusing
// what it refuses (a malformed query string too), without the copy into
// Form that ParseForm makes on every notification and nobody reads.
func postForm(r *http.Request) (url.Values, error) {
	if r.URL.RawQuery != "" {
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			return nil, err
		}
	}
	if r.Body == nil {
		return nil, errors.New("missing form body")
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	ct, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, err
	}
	if ct != "application/x-www-form-urlencoded" {
		return url.Values{}, nil // no form: the signature check says so
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return parseQuery(string(body))
}

// readBody reads a notification's body, r.Body being capped by
// http.MaxBytesReader: Content-Length bytes into one buffer of that size
// when it is given and within maxNotifyBody, where io.ReadAll would grow
// its buffer from 512 bytes.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > maxNotifyBody {
		return io.ReadAll(r.Body) // chunked, or past the cap: MaxBytesReader ends it
	}
	// The server's body reader ends at Content-Length.
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	return body, nil
}

// maxFormParams is net/url's default limit on the parameters of a query
// (GODEBUG urlmaxqueryparams).
const maxFormParams = 10000

// parseQuery is url.ParseQuery — the same split on "&", the same refusal
// of ";" and of bad escapes, the same values — sized for the form at
// once: one map of the right size, one array under every value slice,
// and one buffer under every unescaped key and value, where ParseQuery
// grows its map and makes a slice and a string per field (a notification
// has eight or so fields with escapes: dates, e-mails, JSON, the sign).
func parseQuery(query string) (url.Values, error) {
	n := strings.Count(query, "&") + 1
	if n > maxFormParams {
		return nil, errors.New("number of URL query parameters exceeded limit")
	}
	m := make(url.Values, n)
	values := make([]string, 0, n)
	// Unescaping never lengthens: one buffer of the query's size holds
	// every unescaped string. A Builder never changes what it has
	// written, so each string sliced from it stays as it was.
	var buf strings.Builder
	buf.Grow(len(query))
	var err error
	for query != "" {
		var key string
		key, query, _ = strings.Cut(query, "&")
		if strings.Contains(key, ";") {
			err = errors.New("invalid semicolon separator in query")
			continue
		}
		if key == "" {
			continue
		}
		key, value, _ := strings.Cut(key, "=")
		key, err1 := queryUnescape(&buf, key)
		if err1 != nil {
			err = cmp.Or(err, err1)
			continue
		}
		value, err1 = queryUnescape(&buf, value)
		if err1 != nil {
			err = cmp.Or(err, err1)
			continue
		}
		if prev, ok := m[key]; ok {
			m[key] = append(prev, value) // its cap is its length: a copy, never into values
		} else {
			values = append(values, value)
			m[key] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	return m, err
}

// queryUnescape is url.QueryUnescape(s), the same value and the same
// error, written into buf when s has an escape or a '+' (s itself when
// it has neither).
func queryUnescape(buf *strings.Builder, s string) (string, error) {
	escaped := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", url.EscapeError(s[i:min(i+3, len(s))])
			}
			escaped = true
			i += 2
		case '+':
			escaped = true
		}
	}
	if !escaped {
		return s, nil
	}
	start := buf.Len()
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			buf.WriteByte(unHex(s[i+1])<<4 | unHex(s[i+2]))
			i += 2
		case '+':
			buf.WriteByte(' ')
		default:
			buf.WriteByte(s[i])
		}
	}
	return buf.String()[start:], nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unHex is the value of the hex digit c (isHex).
func unHex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
