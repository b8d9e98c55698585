package wechatpay

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"

	"paynotify/model"
)

// Bill errors.
var (
	// ErrNoBill: WeChat Pay (signed) has no bill for the day: no trade
	// was made (NO_STATEMENT_EXIST).
	ErrNoBill = fmt.Errorf("%w: no trade bill for the day", model.ErrGatewayRefused)
	// ErrBillNotReady: the day's bill is still being made
	// (STATEMENT_CREATING; WeChat Pay has it after 10:00 the next day).
	ErrBillNotReady = fmt.Errorf("%w: the trade bill is not ready yet", model.ErrGatewayUnknown)
	// ErrBillHash: the downloaded bill is not what hash_value says.
	ErrBillHash = fmt.Errorf("%w: the trade bill's SHA1 does not match hash_value", model.ErrGatewayUnknown)
)

// BillLink is where a day's trade bill is, and what it must hash to
// (GET /v3/bill/tradebill).
type BillLink struct {
	// Day is the bill's day, in Beijing time.
	Day time.Time
	// DownloadURL is valid for 30 s, signed request only.
	DownloadURL string
	// HashType is SHA1; HashValue is the bill's, in hex.
	HashType, HashValue string
}

// TradeBill asks where the day's trade bill (bill_type ALL) is. The SDK
// has no call for it: the request goes through its signing client.
func (c *Client) TradeBill(ctx context.Context, day time.Time) (BillLink, error) {
	date := day.In(model.Beijing).Format(time.DateOnly)
	q := url.Values{"bill_date": {date}, "bill_type": {"ALL"}}
	res, err := c.sdk.Get(ctx, DefaultGateway+"/v3/bill/tradebill?"+q.Encode())
	if err != nil {
		err = c.failure("trade bill", err)
		var ae *APIError
		if errors.As(err, &ae) && ae.Signed {
			switch ae.Code {
			case "NO_STATEMENT_EXIST":
				return BillLink{}, fmt.Errorf("%w: %s", ErrNoBill, date)
			case "STATEMENT_CREATING":
				return BillLink{}, fmt.Errorf("%w: %s", ErrBillNotReady, date)
			}
		}
		return BillLink{}, err
	}
	defer res.Response.Body.Close()
	var b struct {
		HashType    string `json:"hash_type"`
		HashValue   string `json:"hash_value"`
		DownloadURL string `json:"download_url"`
	}
	if err := json.NewDecoder(res.Response.Body).Decode(&b); err != nil {
		return BillLink{}, fmt.Errorf("%w: wechatpay trade bill: %v", model.ErrGatewayUnknown, err)
	}
	if b.DownloadURL == "" || !strings.EqualFold(b.HashType, "SHA1") || len(b.HashValue) != 2*sha1.Size {
		return BillLink{}, fmt.Errorf("%w: wechatpay trade bill %s: no download_url or no SHA1 hash_value", model.ErrGatewayUnknown, date)
	}
	return BillLink{Day: day, DownloadURL: b.DownloadURL, HashType: "SHA1", HashValue: strings.ToLower(b.HashValue)}, nil
}

// DownloadBill fetches the bill at l.DownloadURL with a signed request.
// The answer is not signed (WeChat Pay signs no file): what vouches for
// it is the SHA1 of the signed TradeBill answer, checked as the body is
// read — the reader's last Read returns ErrBillHash if it differs, so a
// caller that reads to io.EOF has a bill that matched. The caller closes
// the reader.
func (c *Client) DownloadBill(ctx context.Context, l BillLink) (io.ReadCloser, error) {
	unsigned := core.NewClientWithValidator(c.sdk, &validators.NullValidator{})
	res, err := unsigned.Get(ctx, l.DownloadURL)
	if err != nil {
		var sdkErr *core.APIError
		if errors.As(err, &sdkErr) {
			return nil, fmt.Errorf("%w: wechatpay bill download: HTTP %d %s", model.ErrGatewayUnknown, sdkErr.StatusCode, sdkErr.Code)
		}
		return nil, fmt.Errorf("%w: wechatpay bill download: %v", model.ErrGatewayUnknown, err)
	}
	return &hashed{body: res.Response.Body, h: sha1.New(), want: l.HashValue}, nil
}

// hashed checks a body's SHA1 at its end.
type hashed struct {
	body io.ReadCloser
	h    hash.Hash
	want string
}

// Read implements io.Reader.
func (r *hashed) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	r.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(r.h.Sum(nil)); got != r.want {
			return n, fmt.Errorf("%w: got %s, want %s", ErrBillHash, got, r.want)
		}
	}
	return n, err
}

// Close implements io.Closer.
func (r *hashed) Close() error { return r.body.Close() }
