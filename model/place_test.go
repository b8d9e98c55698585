package model_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/model"
)

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestPriceOrder(t *testing.T) {
	items := func(lines ...string) []model.OrderItem {
		// lines are "price", each ordered twice, so quantity is exercised.
		var its []model.OrderItem
		for i, p := range lines {
			its = append(its, model.OrderItem{SKUID: int64(i + 1), Quantity: 2, Price: d(p)})
		}
		return its
	}
	type price struct{ Total, Coupon, Integration, IntegrationAmount, Pay string }
	for _, tc := range []struct {
		name   string
		items  []model.OrderItem
		coupon string
		points int
		want   price
	}{
		{name: "NoDiscount", items: items("10.00", "2.50"), coupon: "0", points: 0,
			want: price{"25.00", "0.00", "0", "0.00", "25.00"}},
		{name: "CouponAndPoints", items: items("10.00"), coupon: "5.00", points: 300,
			want: price{"20.00", "5.00", "300", "3.00", "12.00"}},
		{name: "HundredPointsAreOneYuan", items: items("10.00"), coupon: "0", points: 100,
			want: price{"20.00", "0.00", "100", "1.00", "19.00"}},
		{name: "OddPointsAreCents", items: items("10.00"), coupon: "0", points: 1,
			want: price{"20.00", "0.00", "1", "0.01", "19.99"}},
		{name: "CouponLargerThanTotalLeavesOneCent", items: items("1.00"), coupon: "50.00", points: 0,
			want: price{"2.00", "1.99", "0", "0.00", "0.01"}},
		{name: "CouponEqualToTotalLeavesOneCent", items: items("1.00"), coupon: "2.00", points: 0,
			want: price{"2.00", "1.99", "0", "0.00", "0.01"}},
		{name: "CouponLargerThanTotalSpendsNoPoints", items: items("1.00"), coupon: "50.00", points: 500,
			want: price{"2.00", "1.99", "0", "0.00", "0.01"}},
		{name: "PointsCappedToWhatIsNeeded", items: items("1.00"), coupon: "0", points: 100_000,
			want: price{"2.00", "0.00", "199", "1.99", "0.01"}},
		{name: "PointsCappedAfterCoupon", items: items("10.00"), coupon: "15.00", points: 100_000,
			want: price{"20.00", "15.00", "499", "4.99", "0.01"}},
		{name: "PointsExactlyEnough", items: items("1.00"), coupon: "0", points: 199,
			want: price{"2.00", "0.00", "199", "1.99", "0.01"}},
		{name: "OneCentOrderTakesNothing", items: []model.OrderItem{{SKUID: 1, Quantity: 1, Price: d("0.01")}}, coupon: "5.00", points: 100,
			want: price{"0.01", "0.00", "0", "0.00", "0.01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := model.PriceOrder(tc.items, d(tc.coupon), tc.points)
			got := price{p.Total.StringFixed(2), p.CouponAmount.StringFixed(2), decimal.NewFromInt(int64(p.Integration)).String(),
				p.IntegrationAmount.StringFixed(2), p.Pay.StringFixed(2)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("PriceOrder (-want +got):\n%s", diff)
			}
			// What is paid and what is discounted always add up to the total.
			if sum := p.Pay.Add(p.CouponAmount).Add(p.IntegrationAmount); !sum.Equal(p.Total) && !p.Total.LessThan(model.MinPayAmount) {
				t.Fatalf("pay %s + coupon %s + points %s = %s, want total %s", p.Pay, p.CouponAmount, p.IntegrationAmount, sum, p.Total)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	lines := func(kv ...int) []model.ItemRequest {
		var its []model.ItemRequest
		for i := 0; i+1 < len(kv); i += 2 {
			its = append(its, model.ItemRequest{SKUID: int64(kv[i]), Quantity: kv[i+1]})
		}
		return its
	}
	tooMany := make([]model.ItemRequest, model.MaxOrderLines+1)
	for i := range tooMany {
		tooMany[i] = model.ItemRequest{SKUID: int64(i + 1), Quantity: 1}
	}
	for _, tc := range []struct {
		name    string
		req     model.PlaceOrder
		want    []model.ItemRequest
		wantErr bool
	}{
		{name: "SortsLinesBySKU", req: model.PlaceOrder{Items: lines(3, 1, 1, 2, 2, 3)}, want: lines(1, 2, 2, 3, 3, 1)},
		{name: "OneLine", req: model.PlaceOrder{Items: lines(7, model.MaxLineQuantity)}, want: lines(7, model.MaxLineQuantity)},
		{name: "NoLines", req: model.PlaceOrder{}, wantErr: true},
		{name: "TooManyLines", req: model.PlaceOrder{Items: tooMany}, wantErr: true},
		{name: "ZeroSKU", req: model.PlaceOrder{Items: lines(0, 1)}, wantErr: true},
		{name: "NegativeSKU", req: model.PlaceOrder{Items: lines(-1, 1)}, wantErr: true},
		{name: "ZeroQuantity", req: model.PlaceOrder{Items: lines(1, 0)}, wantErr: true},
		{name: "QuantityTooLarge", req: model.PlaceOrder{Items: lines(1, model.MaxLineQuantity+1)}, wantErr: true},
		{name: "SKUTwice", req: model.PlaceOrder{Items: lines(2, 1, 1, 1, 2, 5)}, wantErr: true},
		{name: "NegativeCoupon", req: model.PlaceOrder{Items: lines(1, 1), CouponID: -1}, wantErr: true},
		{name: "NegativePoints", req: model.PlaceOrder{Items: lines(1, 1), UseIntegration: -1}, wantErr: true},
		{name: "TooManyPoints", req: model.PlaceOrder{Items: lines(1, 1), UseIntegration: 100_000_001}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]model.ItemRequest(nil), tc.req.Items...)
			got, err := tc.req.Normalize()
			if tc.wantErr {
				if !errors.Is(err, model.ErrInvalidRequest) {
					t.Fatalf("err = %v, want ErrInvalidRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if diff := cmp.Diff(tc.want, got.Items); diff != "" {
				t.Fatalf("items (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tc.req.Items); diff != "" {
				t.Fatalf("Normalize changed its receiver's lines (-before +after):\n%s", diff)
			}
		})
	}
}

func TestHash(t *testing.T) {
	norm := func(t *testing.T, p model.PlaceOrder) string {
		t.Helper()
		n, err := p.Normalize()
		if err != nil {
			t.Fatalf("Normalize: %v", err)
		}
		return n.Hash()
	}
	base := model.PlaceOrder{Items: []model.ItemRequest{{SKUID: 1, Quantity: 2}, {SKUID: 5, Quantity: 1}}, CouponID: 9, UseIntegration: 300}
	for _, tc := range []struct {
		name string
		req  model.PlaceOrder
		same bool
	}{
		{name: "Identical", req: base, same: true},
		{name: "LinesReordered", same: true,
			req: model.PlaceOrder{Items: []model.ItemRequest{{SKUID: 5, Quantity: 1}, {SKUID: 1, Quantity: 2}}, CouponID: 9, UseIntegration: 300}},
		{name: "OtherQuantity",
			req: model.PlaceOrder{Items: []model.ItemRequest{{SKUID: 1, Quantity: 3}, {SKUID: 5, Quantity: 1}}, CouponID: 9, UseIntegration: 300}},
		{name: "OtherSKU",
			req: model.PlaceOrder{Items: []model.ItemRequest{{SKUID: 2, Quantity: 2}, {SKUID: 5, Quantity: 1}}, CouponID: 9, UseIntegration: 300}},
		{name: "NoCoupon",
			req: model.PlaceOrder{Items: base.Items, UseIntegration: 300}},
		{name: "OtherPoints",
			req: model.PlaceOrder{Items: base.Items, CouponID: 9, UseIntegration: 301}},
		{name: "LineDropped",
			req: model.PlaceOrder{Items: base.Items[:1], CouponID: 9, UseIntegration: 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := norm(t, base), norm(t, tc.req)
			if len(b) != 64 {
				t.Fatalf("hash %q is not 64 hex digits", b)
			}
			if (a == b) != tc.same {
				t.Fatalf("hash equal = %v, want %v (%s vs %s)", a == b, tc.same, a, b)
			}
		})
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	long := make([]byte, 65)
	for i := range long {
		long[i] = 'k'
	}
	for _, tc := range []struct {
		name string
		key  string
		want bool
	}{
		{"UUID", "3f1c2a9e-6a0b-4c1d-9f3e-0b7c1d2e3f40", true},
		{"OneChar", "k", true},
		{"SixtyFour", string(long[:64]), true},
		{"Empty", "", false},
		{"SixtyFive", string(long), false},
		{"Space", "a b", false},
		{"NonASCII", "订单-1", false},
		{"Newline", "a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := model.ValidIdempotencyKey(tc.key); got != tc.want {
				t.Fatalf("ValidIdempotencyKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}
