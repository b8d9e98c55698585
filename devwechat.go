package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/model"
)

// devWeChatPay starts dev's fake WeChat Pay on a loopback port of its own
// (the SDK keeps WeChat Pay's paths at the root of the gateway), signing
// at random with its public key or its platform certificate (the service
// trusts both), and notifying base's /wechatpay/notify; gateway is where
// it answers (devProviderConfig's merchant is pointed at it). dev tells it
// of each replayed payment so the jobs find it (fakewechatpay.Verifier).
func devWeChatPay(base string, log *slog.Logger) (fake *fakewechatpay.Server, gateway string, stop func(), err error) {
	fake, err = fakewechatpay.New(fakewechatpay.Config{
		MchID: devWeChatMchID, AppID: devWeChatAppID, AppIDs: []string{devWeChatSecondAppID}, APIv3Key: devWeChatAPIv3Key,
		PrivateKey: devKey("wechatpay_private_key.pem"), PublicKeyID: devWeChatPublicKeyID,
		PlatformKey: devKey("wechatpay_platform_private_key.pem"), PlatformCert: devKey("wechatpay_platform_cert.pem"),
		Sign:              fakewechatpay.SignEither,
		MerchantPublicKey: devKey("wechatpay_merchant_public_key.pem"), MerchantSerial: devWeChatMerchantSerial,
		NotifyURL: base + "/wechatpay/notify",
	})
	if err != nil {
		return nil, "", nil, err
	}
	// As dev's fake Alipay: a payment WeChat Pay took on the replay files'
	// day whose notification never came, for an order this database does
	// not have; reconciling that day finds it in the bill, UNMATCHED.
	fake.AddPaidTrade(devWeChatUnmatchedSN, devWeChatUnmatchedTrade, 5800, time.Date(2026, 11, 30, 16, 0, 0, 0, model.Beijing))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fake.Close()
		return nil, "", nil, fmt.Errorf("dev: fake WeChat Pay: %w", err)
	}
	srv := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("fake WeChat Pay stopped", "err", err)
		}
	}()
	stop = func() {
		fake.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
	gateway = "http://" + ln.Addr().String()
	log.Info("dev mode: a fake WeChat Pay at "+gateway, "mchid", devWeChatMchID, "appids", devWeChatAppID+","+devWeChatSecondAppID)
	return fake, gateway, stop, nil
}

// devWeChatUnmatchedSN and devWeChatUnmatchedTrade are the payment dev's
// fake WeChat Pay took for no order (58.00).
const (
	devWeChatUnmatchedSN    = "DEMO-1098"
	devWeChatUnmatchedTrade = "4200002026113000000000001098"
)
