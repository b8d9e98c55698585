package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// RequestState is where a client's idempotent request stands.
type RequestState string

// Request states. PROCESSING is only ever seen by the transaction that
// holds the key; others see it as a lock they wait on.
const (
	RequestProcessing RequestState = "PROCESSING"
	RequestSuccess    RequestState = "SUCCESS"
	RequestUnknown    RequestState = "UNKNOWN"
)

// OrderRequest is a row of oms_order_request: the idempotency record of
// one "place order" request, keyed by (member, key).
type OrderRequest struct {
	MemberID       int64
	IdempotencyKey string
	RequestHash    string
	OrderID        *int64
	State          RequestState
	ResponseStatus int
	Response       []byte
}

// Limits on what one order may ask for.
const (
	MaxOrderLines    = 50
	MaxLineQuantity  = 999
	PointsPerYuan    = 100
	maxUseIntegation = 100_000_000
)

// MinPayAmount is the least an order can cost: Alipay takes no zero trades.
var MinPayAmount = decimal.New(1, -2)

var idempotencyKeyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,64}$`)

// ValidIdempotencyKey reports whether k is 1–64 visible ASCII characters.
func ValidIdempotencyKey(k string) bool { return idempotencyKeyPattern.MatchString(k) }

// CheckIdempotencyKey refuses, as ErrInvalidRequest, a request's missing
// or malformed Idempotency-Key header, saying which.
func CheckIdempotencyKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: the Idempotency-Key header is required: a key of your own for this request (1 to 64 visible ASCII characters), sent again unchanged on a retry", ErrInvalidRequest)
	case !ValidIdempotencyKey(k):
		return fmt.Errorf("%w: Idempotency-Key must be 1 to 64 visible ASCII characters", ErrInvalidRequest)
	}
	return nil
}

// ItemRequest is one line of a "place order" request.
type ItemRequest struct {
	SKUID    int64 `json:"sku_id"`
	Quantity int   `json:"quantity"`
}

// PlaceOrder is what a member asks for. Prices are never the client's.
type PlaceOrder struct {
	Items          []ItemRequest `json:"items"`
	CouponID       int64         `json:"coupon_id,omitempty"`
	UseIntegration int           `json:"use_integration,omitempty"`
}

// Normalize validates the request and sorts its lines by SKU id: the
// canonical form that is hashed, and the order in which stock rows are
// locked (one order for every transaction, so they cannot deadlock).
func (p PlaceOrder) Normalize() (PlaceOrder, error) {
	if len(p.Items) == 0 || len(p.Items) > MaxOrderLines {
		return p, fmt.Errorf("%w: items: want 1 to %d lines", ErrInvalidRequest, MaxOrderLines)
	}
	items := append([]ItemRequest(nil), p.Items...)
	sort.Slice(items, func(i, j int) bool { return items[i].SKUID < items[j].SKUID })
	for i, it := range items {
		if it.SKUID <= 0 {
			return p, fmt.Errorf("%w: items: sku_id must be positive", ErrInvalidRequest)
		}
		if it.Quantity < 1 || it.Quantity > MaxLineQuantity {
			return p, fmt.Errorf("%w: items: quantity of sku %d must be 1 to %d", ErrInvalidRequest, it.SKUID, MaxLineQuantity)
		}
		if i > 0 && items[i-1].SKUID == it.SKUID {
			return p, fmt.Errorf("%w: items: sku %d appears twice", ErrInvalidRequest, it.SKUID)
		}
	}
	if p.CouponID < 0 {
		return p, fmt.Errorf("%w: coupon_id must be positive", ErrInvalidRequest)
	}
	if p.UseIntegration < 0 || p.UseIntegration > maxUseIntegation {
		return p, fmt.Errorf("%w: use_integration must be 0 to %d", ErrInvalidRequest, maxUseIntegation)
	}
	p.Items = items
	return p, nil
}

// Hash is the SHA-256 of the canonical request: the same request always
// hashes the same, whatever the order of its lines or JSON fields.
func (p PlaceOrder) Hash() string {
	b, _ := json.Marshal(p) // a struct of ints: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Price is what an order costs.
type Price struct {
	Total             decimal.Decimal
	CouponAmount      decimal.Decimal
	Integration       int
	IntegrationAmount decimal.Decimal
	Pay               decimal.Decimal
}

// PriceOrder prices lines against a coupon and the points a member asked
// to use: pay = total − coupon − points/100, never below 0.01. A coupon
// worth more than the order is used up; points are spent only as far as
// they are needed.
func PriceOrder(items []OrderItem, coupon decimal.Decimal, points int) Price {
	var p Price
	for _, it := range items {
		p.Total = p.Total.Add(it.Price.Mul(decimal.NewFromInt(int64(it.Quantity))))
	}
	p.CouponAmount = decimal.Min(coupon, p.Total.Sub(MinPayAmount))
	if p.CouponAmount.IsNegative() {
		p.CouponAmount = decimal.Zero
	}
	rest := p.Total.Sub(p.CouponAmount).Sub(MinPayAmount) // what points may still cover
	maxPoints := rest.Mul(decimal.NewFromInt(PointsPerYuan)).IntPart()
	p.Integration = points
	if int64(points) > maxPoints {
		p.Integration = int(max(maxPoints, 0))
	}
	p.IntegrationAmount = decimal.New(int64(p.Integration), -2)
	p.Pay = p.Total.Sub(p.CouponAmount).Sub(p.IntegrationAmount)
	if p.Pay.LessThan(MinPayAmount) {
		p.Pay = MinPayAmount
	}
	return p
}

// SKU is a row of pms_sku_stock: price and stock of one sellable unit.
type SKU struct {
	ID        int64
	Price     decimal.Decimal
	Stock     int
	LockStock int
}

// Available is the stock not reserved by unpaid orders.
func (s SKU) Available() int { return s.Stock - s.LockStock }

// Coupon is a row of sms_coupon_history: one coupon a member holds.
type Coupon struct {
	ID        int64
	MemberID  int64
	Amount    decimal.Decimal
	UseStatus int
}

// Coupon use statuses.
const (
	CouponUnused = 0
	CouponUsed   = 1
)

// FormatReservation writes the stock an order reserves as
// "sku:qty,sku:qty", in the order given (ascending SKU id).
func FormatReservation(items []OrderItem) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(it.SKUID, 10))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(it.Quantity))
	}
	return b.String()
}

// ParseReservation reads what FormatReservation wrote.
func ParseReservation(s string) ([]ItemRequest, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]ItemRequest, len(parts))
	for i, p := range parts {
		sku, qty, ok := strings.Cut(p, ":")
		id, err1 := strconv.ParseInt(sku, 10, 64)
		n, err2 := strconv.Atoi(qty)
		if !ok || err1 != nil || err2 != nil || id <= 0 || n <= 0 {
			return nil, fmt.Errorf("stock reservation %q: malformed", s)
		}
		out[i] = ItemRequest{SKUID: id, Quantity: n}
	}
	return out, nil
}
