package alipay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay/bill"
	"paynotify/internal/netguard"
	"paynotify/model"
)

// Limits of a bill download. Alipay's URL expires about 30 s after the
// query, so the download starts at once; a big merchant's day is tens of
// megabytes zipped.
const (
	// MaxBillBytes bounds the ZIP downloaded.
	MaxBillBytes = 1 << 30
	// BillDownloadTimeout bounds the whole download.
	BillDownloadTimeout = 5 * time.Minute
)

// Bill is a downloaded trade bill, checked against its own totals: what
// Entries hands out is whole and consistent. Close removes its file.
type Bill struct {
	*bill.File
	f *os.File
}

// Close releases the bill's file.
func (b *Bill) Close() error { return b.f.Close() }

// TradeBill fetches the trade bill of a Beijing day: it asks Alipay for the
// download URL (alipay.data.dataservice.bill.downloadurl.query, bill_type
// trade), downloads the ZIP at once into a temporary file (HTTPS only in
// production; public addresses only unless the gateway is a fake; at most
// MaxBillBytes within BillDownloadTimeout) and opens it, which reads it
// once to check it — every field, and that it is the bill of day and of our
// seller_id (#账号, the file name). A day without business is
// model.ErrNoBill; a damaged file is model.ErrBadBill; a failed call is
// model.ErrGatewayUnknown or model.ErrGatewayRefused as for every call.
func (c *Client) TradeBill(ctx context.Context, day time.Time) (*Bill, error) {
	date := day.In(model.Beijing).Format("2006-01-02")
	rsp, err := c.sdk.BillDownloadURLQuery(ctx, smartwalle.BillDownloadURLQuery{BillType: "trade", BillDate: date})
	if err == nil && rsp != nil && !rsp.Code.IsSuccess() && noBill(rsp.SubCode) {
		return nil, fmt.Errorf("%w: %s: %s %s", model.ErrNoBill, date, rsp.SubCode, rsp.SubMsg)
	}
	if err := outcome("bill url query", rsp, err); err != nil {
		return nil, err
	}
	u, err := url.Parse(rsp.BillDownloadURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && (c.production || u.Scheme != "http")) {
		return nil, fmt.Errorf("%w: alipay bill url for %s is not an https URL", model.ErrGatewayUnknown, date)
	}
	f, err := os.CreateTemp("", "alipay-bill-*.zip")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: the open file is all that is needed, and nothing is
	// left behind whatever happens next.
	os.Remove(f.Name())
	size, err := c.download(ctx, u.String(), f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bill of %s: %w", date, err)
	}
	bf, err := bill.Open(f, size)
	if err == nil {
		err = bf.Covers(day)
	}
	if err == nil {
		err = bf.Of(c.sellerID)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bill of %s: %w", date, err)
	}
	return &Bill{File: bf, f: f}, nil
}

// noBill reports whether a sub_code says there is no bill for the day:
// Alipay has written it as isp.bill_not_exist, BILL_NOT_EXIST and
// NO_BILL_DATA.
func noBill(subCode string) bool {
	s := strings.ToUpper(subCode)
	return strings.HasSuffix(s, "BILL_NOT_EXIST") || strings.HasSuffix(s, "NO_BILL_DATA")
}

// download copies the file at u into f and returns its size. An address
// that is not public is refused before it is dialled, with one error
// whatever listens there.
func (c *Client) download(ctx context.Context, u string, f *os.File) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, BillDownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	// The URL is Alipay's word, so the client dials public addresses only
	// (checked after DNS, on every connection, redirects included). It
	// follows redirects; one away from https is refused in production as
	// the URL itself would be.
	hc := netguard.Client(c.billFetch, 0)
	hc.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if c.production && r.URL.Scheme != "https" {
			return errors.New("redirect away from https")
		}
		if len(via) >= 3 {
			return errors.New("too many redirects")
		}
		return nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: alipay bill download: %v", model.ErrGatewayUnknown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: alipay bill download: HTTP %d", model.ErrGatewayUnknown, resp.StatusCode)
	}
	if resp.ContentLength > MaxBillBytes {
		return 0, fmt.Errorf("%w: bill of %d bytes is over the %d limit", model.ErrBadBill, resp.ContentLength, MaxBillBytes)
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, MaxBillBytes+1))
	if err != nil {
		return 0, fmt.Errorf("%w: alipay bill download: %v", model.ErrGatewayUnknown, err)
	}
	if n > MaxBillBytes {
		return 0, fmt.Errorf("%w: bill over the %d-byte limit", model.ErrBadBill, MaxBillBytes)
	}
	return n, nil
}

// BillTotals are the bill's own totals, which its lines add up to.
func (b *Bill) BillTotals() model.BillTotals { return b.File.Totals }
