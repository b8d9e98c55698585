package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

var jwtSecret = []byte("order-api-test-secret-0123456789abcdef")

// shop is the order API over a real store, and the catalogue its cases
// order from: one SKU at 10.00 with 5 in stock, and three members.
type shop struct {
	store    *dao.Store
	h        http.Handler
	payments *service.Payments
	sku      int64
	// alice and bob have 1000 points and a 2.00 coupon each; poor has 50
	// points.
	alice, bob, poor         int64
	aliceCoupon, bobCoupon   int64
	aliceUsedCoupon, unknown int64
}

func newShop(t *testing.T, store *dao.Store) *shop {
	t.Helper()
	ctx := t.Context()
	s := &shop{store: store, payments: service.NewPayments(store), unknown: 1_000_000}
	s.h = validated(t, handler.New(handler.Deps{
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Payments:  s.payments,
		Orders:    service.NewOrders(store),
		JWTSecret: jwtSecret,
		DB:        store,
		Registry:  prometheus.NewRegistry(),
	}))
	must := func(id int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("catalogue: %v", err)
		}
		return id
	}
	s.sku = must(store.InsertSKU(ctx, "sku", decimal.RequireFromString("10.00"), 5))
	s.alice = must(store.InsertMember(ctx, "alice", 1000))
	s.bob = must(store.InsertMember(ctx, "bob", 1000))
	s.poor = must(store.InsertMember(ctx, "poor", 50))
	s.aliceCoupon = must(store.InsertCoupon(ctx, s.alice, decimal.RequireFromString("2.00")))
	s.aliceUsedCoupon = must(store.InsertCoupon(ctx, s.alice, decimal.RequireFromString("2.00")))
	s.bobCoupon = must(store.InsertCoupon(ctx, s.bob, decimal.RequireFromString("2.00")))
	return s
}

func (s *shop) token(t *testing.T, member int64) string {
	t.Helper()
	tok, err := handler.MemberToken(jwtSecret, member, time.Hour)
	if err != nil {
		t.Fatalf("MemberToken: %v", err)
	}
	return "Bearer " + tok
}

// call serves one API request; auth is the Authorization header (none if
// empty), key the Idempotency-Key (none if empty).
func (s *shop) call(method, path, auth, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

// mustPlace places an order as member and returns the 201 answer.
func (s *shop) mustPlace(t *testing.T, member int64, key, body string) (*httptest.ResponseRecorder, service.OrderView) {
	t.Helper()
	w := s.call(http.MethodPost, "/api/v1/orders", s.token(t, member), key, body)
	if w.Code != http.StatusCreated {
		t.Fatalf("place %s: %d %s, want 201", key, w.Code, w.Body)
	}
	return w, decodeOrder(t, w.Body.Bytes())
}

func decodeOrder(t *testing.T, body []byte) service.OrderView {
	t.Helper()
	var v service.OrderView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode order %s: %v", body, err)
	}
	return v
}

// placeBody is a "place order" body for one line.
func placeBody(sku int64, qty int, coupon int64, points int) string {
	b, _ := json.Marshal(model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: qty}}, CouponID: coupon, UseIntegration: points})
	return string(b)
}

// errorCode is the code of an API error answer.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error answer %q: %v", w.Body, err)
	}
	return e.Error.Code
}

// Every refused request answers its status and code, and changes nothing.
func TestOrderAPIRefusals(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newShop(t, store)
		_, unpaid := s.mustPlace(t, s.alice, "alice-1", placeBody(s.sku, 1, s.aliceUsedCoupon, 100))
		_, paid := s.mustPlace(t, s.alice, "alice-2", placeBody(s.sku, 1, 0, 0))
		pay := model.Observation{Provider: model.ProviderAlipay, OutTradeNo: paid.OrderSN, TradeNo: "T-" + paid.OrderSN,
			Amount: decimal.RequireFromString(paid.PayAmount)}
		if _, outcome, err := s.payments.Observe(t.Context(), pay); err != nil || outcome != model.OutcomeApplied {
			t.Fatalf("pay %s: %s %v", paid.OrderSN, outcome, err)
		}
		// 3 of the 5 units are left unreserved.
		good := placeBody(s.sku, 1, 0, 0)
		other, err := handler.MemberToken([]byte("another-secret-entirely-0123456789"), s.alice, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expired, err := handler.MemberToken(jwtSecret, s.alice, -time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		nobody, err := handler.MemberToken(jwtSecret, 0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}

		const place = "POST /api/v1/orders"
		cases := []struct {
			name string
			// route is "METHOD path"; {unpaid} and {paid} stand for those
			// orders' order_sn.
			route string
			// as is the member whose token is sent, unless auth is set.
			as         int64
			auth       string
			noAuth     bool
			key        string
			body       string
			wantStatus int
			wantCode   string
			// wantSays, if set, is in the answer's message.
			wantSays string
		}{
			{name: "MissingIdempotencyKey", route: place, body: good, wantStatus: 400, wantCode: "invalid_request", wantSays: "the Idempotency-Key header is required"},
			{name: "IdempotencyKeyWithSpace", route: place, key: "two words", body: good, wantStatus: 400, wantCode: "invalid_request", wantSays: "must be 1 to 64 visible ASCII"},
			{name: "IdempotencyKeyTooLong", route: place, key: strings.Repeat("k", 65), body: good, wantStatus: 400, wantCode: "invalid_request"},
			{name: "IdempotencyKeyNotASCII", route: place, key: "订单", body: good, wantStatus: 400, wantCode: "invalid_request"},
			{name: "MalformedBody", route: place, key: "k-1", body: `{"items": [`, wantStatus: 400, wantCode: "invalid_request"},
			{name: "EmptyBody", route: place, key: "k-1", body: ``, wantStatus: 400, wantCode: "invalid_request"},
			{name: "UnknownField", route: place, key: "k-1", wantStatus: 400, wantCode: "invalid_request",
				body: fmt.Sprintf(`{"items":[{"sku_id":%d,"quantity":1}],"pay_amount":"0.01"}`, s.sku)},
			{name: "TwoObjects", route: place, key: "k-1", body: good + good, wantStatus: 400, wantCode: "invalid_request"},
			{name: "StringQuantity", route: place, key: "k-1", wantStatus: 400, wantCode: "invalid_request",
				body: fmt.Sprintf(`{"items":[{"sku_id":%d,"quantity":"1"}]}`, s.sku)},
			{name: "NoLines", route: place, key: "k-1", body: `{"items":[]}`, wantStatus: 400, wantCode: "invalid_request"},
			{name: "ZeroQuantity", route: place, key: "k-1", body: placeBody(s.sku, 0, 0, 0), wantStatus: 400, wantCode: "invalid_request"},
			{name: "SameKeyOtherBody", route: place, key: "alice-1", body: placeBody(s.sku, 2, 0, 0), wantStatus: 422, wantCode: "idempotency_key_reused"},
			{name: "OutOfStock", route: place, key: "k-1", body: placeBody(s.sku, 4, 0, 0), wantStatus: 409, wantCode: "out_of_stock"},
			{name: "UnknownSKU", route: place, key: "k-1", body: placeBody(s.unknown, 1, 0, 0), wantStatus: 422, wantCode: "sku_not_found"},
			{name: "OthersCoupon", route: place, key: "k-1", body: placeBody(s.sku, 1, s.bobCoupon, 0), wantStatus: 422, wantCode: "coupon_not_usable"},
			{name: "UsedCoupon", route: place, key: "k-1", body: placeBody(s.sku, 1, s.aliceUsedCoupon, 0), wantStatus: 422, wantCode: "coupon_not_usable"},
			{name: "UnknownCoupon", route: place, key: "k-1", body: placeBody(s.sku, 1, s.unknown, 0), wantStatus: 422, wantCode: "coupon_not_usable"},
			// 10.00 could take up to 999 points; 500 are asked, 50 are there.
			{name: "NotEnoughPoints", route: place, as: s.poor, key: "k-1", body: placeBody(s.sku, 1, 0, 500), wantStatus: 422, wantCode: "insufficient_points"},
			{name: "GetOthersOrder", route: "GET /api/v1/orders/{unpaid}", as: s.bob, wantStatus: 404, wantCode: "order_not_found"},
			{name: "GetUnknownOrder", route: "GET /api/v1/orders/NO-SUCH-ORDER", wantStatus: 404, wantCode: "order_not_found"},
			{name: "CancelOthersOrder", route: "POST /api/v1/orders/{unpaid}/cancel", as: s.bob, wantStatus: 404, wantCode: "order_not_found"},
			{name: "CancelUnknownOrder", route: "POST /api/v1/orders/NO-SUCH-ORDER/cancel", wantStatus: 404, wantCode: "order_not_found"},
			{name: "CancelPaidOrder", route: "POST /api/v1/orders/{paid}/cancel", wantStatus: 409, wantCode: "order_not_cancellable"},
			{name: "RequestStatusKeyTooLong", route: "GET /api/v1/order-requests/" + strings.Repeat("k", 65), wantStatus: 400, wantCode: "invalid_request"},
			{name: "NoToken", route: place, noAuth: true, key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "NotBearer", route: place, auth: "Basic YWxpY2U6cHc=", key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "GarbageToken", route: place, auth: "Bearer not.a.token", key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "TokenOfAnotherSecret", route: place, auth: "Bearer " + other, key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "ExpiredToken", route: place, auth: "Bearer " + expired, key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "TokenOfNoMember", route: place, auth: "Bearer " + nobody, key: "k-1", body: good, wantStatus: 401, wantCode: "unauthorized"},
			{name: "CancelWithoutToken", route: "POST /api/v1/orders/{unpaid}/cancel", noAuth: true, wantStatus: 401, wantCode: "unauthorized"},
			{name: "CancelWithExpiredToken", route: "POST /api/v1/orders/{unpaid}/cancel", auth: "Bearer " + expired, wantStatus: 401, wantCode: "unauthorized"},
			{name: "GetWithoutToken", route: "GET /api/v1/orders/{unpaid}", noAuth: true, wantStatus: 401, wantCode: "unauthorized"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				method, path, _ := strings.Cut(tc.route, " ")
				path = strings.NewReplacer("{unpaid}", unpaid.OrderSN, "{paid}", paid.OrderSN).Replace(path)
				auth := tc.auth
				if auth == "" && !tc.noAuth {
					as := tc.as
					if as == 0 {
						as = s.alice
					}
					auth = s.token(t, as)
				}
				before := snapshot(t, store)
				w := s.call(method, path, auth, tc.key, tc.body)
				if w.Code != tc.wantStatus || errorCode(t, w) != tc.wantCode {
					t.Fatalf("%s: %d %s, want %d %s", tc.route, w.Code, w.Body, tc.wantStatus, tc.wantCode)
				}
				if !strings.Contains(w.Body.String(), tc.wantSays) {
					t.Errorf("%s: %s, want it to say %q", tc.route, w.Body, tc.wantSays)
				}
				if after := snapshot(t, store); after != before {
					t.Fatalf("refused request changed rows:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			})
		}
	})
}

// What a member can do, end to end: place (and replay), look up, cancel.
func TestOrderAPI(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newShop(t, store)
		ctx := t.Context()

		t.Run("ReplayAnswersTheSameAndSpendsOnce", func(t *testing.T) {
			second, err := store.InsertSKU(ctx, "second", decimal.RequireFromString("3.00"), 5)
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"items":[{"sku_id":%d,"quantity":1},{"sku_id":%d,"quantity":2}],"coupon_id":%d,"use_integration":150}`,
				s.sku, second, s.aliceCoupon)
			// The same request, its lines and fields in another order.
			same := fmt.Sprintf(`{"use_integration":150,"coupon_id":%d,"items":[{"quantity":2,"sku_id":%d},{"sku_id":%d,"quantity":1}]}`,
				s.aliceCoupon, second, s.sku)
			first, view := s.mustPlace(t, s.alice, "replay-1", body)
			if h := first.Header().Get("Idempotent-Replayed"); h != "" {
				t.Fatalf("first answer has Idempotent-Replayed: %q", h)
			}
			// 10.00 + 2 × 3.00 − 2.00 coupon − 150 points = 12.50.
			if view.PayAmount != "12.50" || view.TotalAmount != "16.00" || len(view.Items) != 2 || view.Status != int(model.OrderAwaitingPayment) {
				t.Fatalf("placed %+v, want 16.00 − 2.00 − 1.50 = 12.50 over two lines", view)
			}
			snap := snapshot(t, store)
			for _, b := range []string{body, same} {
				again, _ := s.mustPlace(t, s.alice, "replay-1", b)
				if h := again.Header().Get("Idempotent-Replayed"); h != "true" {
					t.Fatalf("replay has Idempotent-Replayed %q, want true", h)
				}
				if again.Body.String() != first.Body.String() {
					t.Fatalf("replay answered\n%s\nfirst answer was\n%s", again.Body, first.Body)
				}
			}
			if after := snapshot(t, store); after != snap {
				t.Fatalf("replays changed rows:\nbefore:\n%s\nafter:\n%s", snap, after)
			}
			checkCatalogue(t, store, s.sku, 5, 1)
			checkCatalogue(t, store, second, 5, 2)
			checkWallet(t, store, s.alice, 850, s.aliceCoupon, model.CouponUsed)
		})

		t.Run("SameKeyOtherMemberIsAnotherRequest", func(t *testing.T) {
			body := placeBody(s.sku, 1, 0, 0)
			_, a := s.mustPlace(t, s.alice, "shared-key", body)
			w, b := s.mustPlace(t, s.bob, "shared-key", body)
			if w.Header().Get("Idempotent-Replayed") != "" || b.OrderSN == a.OrderSN {
				t.Fatalf("bob's request answered with alice's order %s (replayed %q)", b.OrderSN, w.Header().Get("Idempotent-Replayed"))
			}
			if o, err := store.Order(ctx, b.OrderSN); err != nil || o.MemberID != s.bob {
				t.Fatalf("bob's order %s: %+v %v, want bob's", b.OrderSN, o, err)
			}
			for _, tc := range []struct {
				name   string
				member int64
				want   string
			}{
				{"Alice", s.alice, a.OrderSN},
				{"Bob", s.bob, b.OrderSN},
			} {
				t.Run(tc.name, func(t *testing.T) {
					st := requestStatus(t, s, tc.member, "shared-key")
					if st.State != model.RequestSuccess || decodeOrder(t, st.Order).OrderSN != tc.want {
						t.Fatalf("status %s with order %s, want SUCCESS with %s", st.State, st.Order, tc.want)
					}
				})
			}
		})

		t.Run("GetOwnOrder", func(t *testing.T) {
			_, placed := s.mustPlace(t, s.bob, "get-own", placeBody(s.sku, 1, 0, 0))
			w := s.call(http.MethodGet, "/api/v1/orders/"+placed.OrderSN, s.token(t, s.bob), "", "")
			if w.Code != http.StatusOK {
				t.Fatalf("GET own order: %d %s", w.Code, w.Body)
			}
			got := decodeOrder(t, w.Body.Bytes())
			if got.OrderSN != placed.OrderSN || got.PayAmount != "10.00" || len(got.Items) != 1 || got.Items[0].SKUID != s.sku || got.Items[0].Quantity != 1 || got.Items[0].Price != "10.00" {
				t.Fatalf("GET own order = %+v, want %+v", got, placed)
			}
		})

		t.Run("RequestStatus", func(t *testing.T) {
			first, _ := s.mustPlace(t, s.bob, "status-1", placeBody(s.sku, 1, 0, 0))
			st := requestStatus(t, s, s.bob, "status-1")
			if st.State != model.RequestSuccess || string(st.Order) != first.Body.String() {
				t.Fatalf("status %s with %s, want SUCCESS with %s", st.State, st.Order, first.Body)
			}
			st = requestStatus(t, s, s.bob, "never-sent")
			if st.State != model.RequestUnknown || st.Order != nil {
				t.Fatalf("unknown key: %s with %s, want UNKNOWN and no order", st.State, st.Order)
			}
		})

		t.Run("CancelTwiceGivesBackOnce", func(t *testing.T) {
			member, err := store.InsertMember(ctx, "carol", 500)
			if err != nil {
				t.Fatal(err)
			}
			coupon, err := store.InsertCoupon(ctx, member, decimal.RequireFromString("1.00"))
			if err != nil {
				t.Fatal(err)
			}
			sku, err := store.InsertSKU(ctx, "cancelled", decimal.RequireFromString("5.00"), 3)
			if err != nil {
				t.Fatal(err)
			}
			_, placed := s.mustPlace(t, member, "cancel-twice", placeBody(sku, 2, coupon, 200))
			checkCatalogue(t, store, sku, 3, 2)
			checkWallet(t, store, member, 300, coupon, model.CouponUsed)
			var answers []string
			for range 2 {
				w := s.call(http.MethodPost, "/api/v1/orders/"+placed.OrderSN+"/cancel", s.token(t, member), "", "")
				if w.Code != http.StatusOK {
					t.Fatalf("cancel: %d %s", w.Code, w.Body)
				}
				answers = append(answers, w.Body.String())
			}
			if answers[0] != answers[1] {
				t.Fatalf("cancels answered\n%s\n%s", answers[0], answers[1])
			}
			if v := decodeOrder(t, []byte(answers[0])); v.Status != int(model.OrderClosed) || v.StatusName != "CLOSED" {
				t.Fatalf("cancelled order %+v, want CLOSED", v)
			}
			checkCatalogue(t, store, sku, 3, 0)
			checkWallet(t, store, member, 500, coupon, model.CouponUnused)
		})
	})
}

// requestState is the answer of GET /api/v1/order-requests/{key}.
type requestState struct {
	Key   string             `json:"idempotency_key"`
	State model.RequestState `json:"state"`
	Order json.RawMessage    `json:"order"`
}

func requestStatus(t *testing.T, s *shop, member int64, key string) requestState {
	t.Helper()
	w := s.call(http.MethodGet, "/api/v1/order-requests/"+key, s.token(t, member), "", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET order-requests/%s: %d %s", key, w.Code, w.Body)
	}
	var st requestState
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatalf("decode %s: %v", w.Body, err)
	}
	if st.Key != key {
		t.Fatalf("answer for key %q, asked %q", st.Key, key)
	}
	return st
}

// checkCatalogue asserts a SKU's stock and reservations.
func checkCatalogue(t *testing.T, store *dao.Store, sku int64, stock, locked int) {
	t.Helper()
	got, err := store.SKU(t.Context(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != stock || got.LockStock != locked {
		t.Fatalf("sku %d: stock %d, lock_stock %d; want %d, %d", sku, got.Stock, got.LockStock, stock, locked)
	}
}

// checkWallet asserts a member's points and one coupon's use status.
func checkWallet(t *testing.T, store *dao.Store, member int64, points int, coupon int64, status int) {
	t.Helper()
	gotPoints, err := store.MemberPoints(t.Context(), member)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Coupon(t.Context(), coupon)
	if err != nil {
		t.Fatal(err)
	}
	if gotPoints != points || c.UseStatus != status {
		t.Fatalf("member %d: %d points, coupon %d use_status %d; want %d, %d", member, gotPoints, coupon, c.UseStatus, points, status)
	}
}

// An idempotency key may hold any visible ASCII, "/" included; its status
// is still found.
func TestOrderRequestKeyWithSlash(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newShop(t, store)
		first, _ := s.mustPlace(t, s.bob, "a/b", placeBody(s.sku, 1, 0, 0))
		w := s.call(http.MethodGet, "/api/v1/order-requests/"+url.PathEscape("a/b"), s.token(t, s.bob), "", "")
		var st requestState
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusOK {
			t.Fatalf("GET: %d %s", w.Code, w.Body)
		}
		if st.Key != "a/b" || st.State != model.RequestSuccess || string(st.Order) != first.Body.String() {
			t.Fatalf("status %q %s with %s, want a/b SUCCESS with %s", st.Key, st.State, st.Order, first.Body)
		}
	})
}

// A request still in flight shows as PROCESSING. MySQL/MariaDB only:
// SQLite has one writer, so while a placement holds the key no other
// connection can even ask, and there is no PROCESSING to see.
func TestOrderRequestStatusWhileProcessing(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	s := newShop(t, store)
	ctx := t.Context()
	{
		// A placement holding the key: its transaction has recorded the
		// request and stays open until the test has asked.
		held, asked := make(chan struct{}), make(chan struct{})
		errRollback := errors.New("rolled back on purpose")
		done := make(chan error, 1)
		go func() {
			_, err := store.PlaceOrder(ctx, model.OrderRequest{MemberID: s.alice, IdempotencyKey: "in-flight", RequestHash: strings.Repeat("0", 64)},
				func(context.Context, *dao.PlaceTx) error {
					close(held)
					<-asked
					return errRollback
				})
			done <- err
		}()
		<-held
		st := requestStatus(t, s, s.alice, "in-flight")
		close(asked)
		if err := <-done; !errors.Is(err, errRollback) {
			t.Fatalf("holding transaction: %v", err)
		}
		if st.State != model.RequestProcessing || st.Order != nil {
			t.Fatalf("held key: %s with %s, want PROCESSING", st.State, st.Order)
		}
		if st := requestStatus(t, s, s.alice, "in-flight"); st.State != model.RequestUnknown {
			t.Fatalf("after rollback: %s, want UNKNOWN", st.State)
		}
	}
}
