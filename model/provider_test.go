package model

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// A provider registered is known everywhere the ledger asks (its pay
// type, its title, its name parsed, listed after the shipped two); the
// same spec again changes nothing; a clash or a name no column holds is
// refused and changes nothing.
func TestRegisterProvider(t *testing.T) {
	spec := ProviderSpec{Name: "registertest", Title: "Register Test", PayType: 901}
	for range 2 {
		if err := RegisterProvider(spec); err != nil {
			t.Fatal(err)
		}
	}
	if spec.Name.PayType() != 901 || spec.Name.Name() != "Register Test" {
		t.Fatalf("registered: pay_type %d, title %q", spec.Name.PayType(), spec.Name.Name())
	}
	if p, err := ParseProvider("registertest"); err != nil || p != spec.Name {
		t.Fatalf("ParseProvider = %q, %v", p, err)
	}
	if ps := Providers(); !slices.Contains(ps, spec.Name) || ps[0] != ProviderAlipay || ps[1] != ProviderWechatpay {
		t.Fatalf("Providers() = %v", ps)
	}
	before := Providers()
	for _, c := range []struct {
		name string
		s    ProviderSpec
	}{
		{"OtherPayType", ProviderSpec{Name: "registertest", Title: "Register Test", PayType: 902}},
		{"PayTypeTaken", ProviderSpec{Name: "registerother", Title: "Other", PayType: PayTypeAlipay}},
		{"ShippedRedefined", ProviderSpec{Name: ProviderAlipay, Title: "Not Alipay", PayType: PayTypeAlipay}},
		{"NoName", ProviderSpec{Title: "x", PayType: 903}},
		{"TooLong", ProviderSpec{Name: "abcdefghijklmnopq", Title: "x", PayType: 903}},
		{"UpperCase", ProviderSpec{Name: "Toy", Title: "x", PayType: 903}},
		{"NoTitle", ProviderSpec{Name: "notitle", PayType: 903}},
		{"NoPayType", ProviderSpec{Name: "nopaytype", Title: "x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := RegisterProvider(c.s); err == nil {
				t.Fatalf("%+v registered", c.s)
			}
		})
	}
	if got := Providers(); !slices.Equal(got, before) {
		t.Fatalf("a refused spec changed the providers: %v, was %v", got, before)
	}
	if _, err := ParseProvider("nopaytype"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a refused provider parses: %v", err)
	}
	if (Observation{Provider: "nopaytype"}).Check() == nil {
		t.Fatal("an observation of a provider never registered is taken")
	}
}

// Providers registered by many goroutines at once, while others read the
// table on every payment's path, are each known once, with their own
// pay type: a registration is never lost to another's copy.
func TestRegisterProviderConcurrently(t *testing.T) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = RegisterProvider(ProviderSpec{Name: Provider(fmt.Sprintf("conc%d", i)), Title: "Concurrent", PayType: PayType(1000 + i)})
		})
		wg.Go(func() {
			<-start
			for range 100 {
				_ = ProviderAlipay.PayType()
				_ = Providers()
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if p := Provider(fmt.Sprintf("conc%d", i)); p.PayType() != PayType(1000+i) || !slices.Contains(Providers(), p) {
			t.Fatalf("%s: pay_type %d, listed %v", p, p.PayType(), slices.Contains(Providers(), p))
		}
	}
}
