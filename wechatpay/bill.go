package wechatpay

import (
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"

	"paynotify/model"
	"paynotify/wechatpay/bill"
)

// Limits of a bill download. WeChat Pay's download_url expires 5 minutes
// after the query, so the download starts at once; a big merchant's day
// is tens of megabytes gzipped.
const (
	// MaxBillBytes bounds the gzip downloaded (bill.MaxBillBytes bounds
	// what it decompresses to).
	MaxBillBytes = 1 << 30
	// BillDownloadTimeout bounds the whole download.
	BillDownloadTimeout = 5 * time.Minute
	// billMonths is how far back WeChat Pay keeps bills.
	billMonths = 3
)

// Bill errors.
var (
	// ErrNoBill: WeChat Pay (signed) has no bill for the day: no trade
	// was made (NO_STATEMENT_EXIST).
	ErrNoBill = fmt.Errorf("%w: no WeChat Pay trade bill for the day (NO_STATEMENT_EXIST)", model.ErrNoBill)
	// ErrBillNotReady: the day's bill is still being made
	// (STATEMENT_CREATING; WeChat Pay has it from 10:00 the next day).
	ErrBillNotReady = fmt.Errorf("%w: WeChat Pay's trade bill is not ready yet", model.ErrGatewayUnknown)
	// ErrBillTooOld: WeChat Pay keeps bills for three months.
	ErrBillTooOld = fmt.Errorf("%w: WeChat Pay keeps trade bills for %d months", model.ErrGatewayRefused, billMonths)
)

// BillLink is where a day's trade bill is, and what it must hash to
// (GET /v3/bill/tradebill).
type BillLink struct {
	// Day is the bill's day, in Beijing time.
	Day time.Time
	// DownloadURL is valid for 5 minutes, signed request only.
	DownloadURL string
	// HashType is SHA1; HashValue is the decompressed bill's, in hex.
	HashType, HashValue string
}

// Bill is a downloaded trade bill, checked against the hash WeChat Pay
// vouched for and against its own summary: what Entries hands out is whole
// and consistent. Close releases its file.
type Bill struct {
	*bill.File
	f *os.File
}

// BillTotals are what the bill's rows add up to.
func (b *Bill) BillTotals() model.BillTotals { return b.File.Totals }

// Close releases the bill's file.
func (b *Bill) Close() error { return b.f.Close() }

// TradeBill fetches the trade bill of a Beijing day: it asks where the
// bill is (BillLink), downloads the gzip at once into a temporary file and
// opens it, which reads it once to check its SHA1 and its summary, and
// that every row is of our mchid (商户号). A day
// without business is ErrNoBill (model.ErrNoBill); a damaged file or one
// that is not what the query vouched for is model.ErrBadBill; a day older
// than three months is ErrBillTooOld.
func (c *Client) TradeBill(ctx context.Context, day time.Time) (*Bill, error) {
	l, err := c.BillLink(ctx, day)
	if err != nil {
		return nil, err
	}
	date := day.In(model.Beijing).Format(time.DateOnly)
	f, err := os.CreateTemp("", "wechatpay-bill-*.csv.gz")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: the open file is all that is needed, and nothing is
	// left behind whatever happens next.
	os.Remove(f.Name())
	size, err := c.DownloadBill(ctx, l, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bill of %s: %w", date, err)
	}
	bf, err := bill.Open(f, size, l.HashType, l.HashValue)
	if err == nil && bf.MchID != "" && bf.MchID != c.mchID {
		err = fmt.Errorf("%w: the bill is merchant %s's, not ours (%s)", model.ErrBadBill, clip(bf.MchID), c.mchID)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wechatpay bill of %s: %w", date, err)
	}
	return &Bill{File: bf, f: f}, nil
}

// BillLink asks where the day's trade bill (bill_type ALL, gzipped) is.
// The SDK has no call for it: the request goes through its signing
// client, and the answer is verified as every answer is.
func (c *Client) BillLink(ctx context.Context, day time.Time) (BillLink, error) {
	date := day.In(model.Beijing).Format(time.DateOnly)
	if oldest := c.oldestBill(); day.In(model.Beijing).Before(oldest) {
		return BillLink{}, fmt.Errorf("%w: %s is before %s", ErrBillTooOld, date, oldest.Format(time.DateOnly))
	}
	q := url.Values{"bill_date": {date}, "bill_type": {"ALL"}, "tar_type": {"GZIP"}}
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
	if err := json.NewDecoder(io.LimitReader(res.Response.Body, 64<<10)).Decode(&b); err != nil {
		return BillLink{}, fmt.Errorf("%w: wechatpay trade bill: %v", model.ErrGatewayUnknown, err)
	}
	if !strings.EqualFold(b.HashType, bill.HashSHA1) || len(b.HashValue) != 2*sha1.Size {
		return BillLink{}, fmt.Errorf("%w: wechatpay trade bill %s: no SHA1 hash_value", model.ErrGatewayUnknown, date)
	}
	u, err := url.Parse(b.DownloadURL)
	if err != nil || u.Host == "" || u.Path != "/v3/billdownload/file" || (u.Scheme != "https" && c.gateway.Scheme == "https") {
		return BillLink{}, fmt.Errorf("%w: wechatpay trade bill %s: download_url is not WeChat Pay's https download", model.ErrGatewayUnknown, date)
	}
	return BillLink{Day: day, DownloadURL: b.DownloadURL, HashType: bill.HashSHA1, HashValue: strings.ToLower(b.HashValue)}, nil
}

// oldestBill is the first Beijing day WeChat Pay still has a bill of.
func (c *Client) oldestBill() time.Time { return oldestBillAt(c.now()) }

// oldestBillAt is the first day WeChat Pay still has a bill of at now:
// three months back.
func oldestBillAt(now time.Time) time.Time {
	y, m, d := now.In(model.Beijing).Date()
	return time.Date(y, m-billMonths, d, 0, 0, 0, 0, model.Beijing)
}

// DownloadBill copies the bill at l.DownloadURL into w with a signed
// request, at most MaxBillBytes within BillDownloadTimeout, and returns
// its size. The answer is not signed (WeChat Pay signs no file): what
// vouches for it is l.HashValue, of the signed query, which bill.Open
// checks. Like every call, it goes to the configured gateway, so our
// signature is never sent to a host the answer names.
func (c *Client) DownloadBill(ctx context.Context, l BillLink, w io.Writer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, BillDownloadTimeout)
	defer cancel()
	unsigned := core.NewClientWithValidator(c.download, &validators.NullValidator{})
	res, err := unsigned.Get(ctx, l.DownloadURL)
	if err != nil {
		var sdkErr *core.APIError
		if errors.As(err, &sdkErr) {
			return 0, fmt.Errorf("%w: wechatpay bill download: HTTP %d %s", model.ErrGatewayUnknown, sdkErr.StatusCode, sdkErr.Code)
		}
		return 0, fmt.Errorf("%w: wechatpay bill download: %v", model.ErrGatewayUnknown, err)
	}
	defer res.Response.Body.Close()
	if res.Response.ContentLength > MaxBillBytes {
		return 0, fmt.Errorf("%w: bill of %d bytes is over the %d limit", model.ErrBadBill, res.Response.ContentLength, MaxBillBytes)
	}
	n, err := io.Copy(w, io.LimitReader(res.Response.Body, MaxBillBytes+1))
	if err != nil {
		return 0, fmt.Errorf("%w: wechatpay bill download: %v", model.ErrGatewayUnknown, err)
	}
	if n > MaxBillBytes {
		return 0, fmt.Errorf("%w: bill over the %d-byte limit", model.ErrBadBill, MaxBillBytes)
	}
	return n, nil
}
