package main

import (
	"fmt"
	"strings"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// providerConfig is the providers' configuration: every account and app
// of each provider, its keys read and checked — what the environment or
// PROVIDERS_FILE configures (loadConfig), or dev's fakes
// (devProviderConfig). A provider with none is off.
type providerConfig struct {
	// alipay are the Alipay apps, every seller's, the default first.
	alipay []alipay.AppConfig
	// wechatpay are the WeChat Pay merchants, the default first.
	wechatpay []wechatpay.Config
	// weChatApps are each merchant's appids as PROVIDERS_FILE lists them,
	// named and limited to their methods; none in the environment form,
	// where a merchant's appids are its Config's.
	weChatApps [][]config.WeChatPayApp
}

// registry is the providers of one reading of the configuration, built:
// provider → accounts → apps → adapter as the use cases and their jobs
// read it, and what verifies each provider's notifications. serve, a
// reload, reconcile and dev build it by newRegistry alone.
type registry struct {
	// sets are the service's providers: one AppSet per provider
	// configured, each added by one line.
	sets service.Providers
	// alipay routes Alipay's notifications to the app they name (nil:
	// Alipay is off).
	alipay *alipay.Apps
	// wechatpay are the WeChat Pay merchants' providers, the default
	// first (none: WeChat Pay is off).
	wechatpay wechatpay.Merchants
}

// newRegistry builds every app of pc: each its client, with its own keys,
// and its adapter, whose notifications come to cfg's PUBLIC_URL.
func newRegistry(cfg config.Config, pc providerConfig) (registry, error) {
	r := registry{sets: service.Providers{}}
	base := strings.TrimRight(cfg.PublicURL, "/")
	if len(pc.alipay) > 0 {
		set, apps, err := alipaySet(pc.alipay, base+"/alipay/notify", cfg.PayReturnURL)
		if err != nil {
			return registry{}, err
		}
		if err := r.sets.Add(set); err != nil {
			return registry{}, err
		}
		r.alipay = apps
	}
	if len(pc.wechatpay) > 0 {
		for _, c := range pc.wechatpay {
			wc, err := wechatpay.New(c)
			if err != nil {
				return registry{}, err
			}
			r.wechatpay = append(r.wechatpay, wechatpay.NewProvider(wc, base+"/wechatpay/notify"))
		}
		if err := r.sets.Add(weChatPaySet(pc.weChatApps, r.wechatpay)); err != nil {
			return registry{}, err
		}
	}
	return r, nil
}

// alipaySet is Alipay's apps as the service's providers, and the router
// of their notifications: each app's adapter speaks with its own keys,
// and its trades are asked of it alone.
func alipaySet(cfgs []alipay.AppConfig, notifyURL, returnURL string) (*service.AppSet, *alipay.Apps, error) {
	var set []service.App
	var clients []*alipay.Client
	for _, ac := range cfgs {
		c, err := alipay.New(ac.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("alipay app %s: %w", ac.AppID, err)
		}
		clients = append(clients, c)
		set = append(set, service.App{Provider: model.ProviderAlipay, Account: c.SellerID(), ID: c.AppID(),
			Name: ac.Name, Methods: ac.Methods, Adapter: alipay.NewProvider(c, notifyURL, returnURL)})
	}
	apps, err := alipay.NewApps(clients...)
	if err != nil {
		return nil, nil, err
	}
	return service.NewAppSet(set...), apps, nil
}

// weChatPaySet is the WeChat Pay merchants' appids as the service's
// providers: one adapter per appid (payments start in it; everything else
// the merchant's apps share), named and limited as PROVIDERS_FILE says.
//
// merchants are PROVIDERS_FILE's, in its order (each its own keys, its
// own mchid the apps' account, apps[i] its appids), or the one WECHATPAY_*
// configures (no apps).
func weChatPaySet(apps [][]config.WeChatPayApp, merchants wechatpay.Merchants) *service.AppSet {
	if len(apps) == 0 {
		// WECHATPAY_APPID: one app. (dev's client knows a second appid.)
		p := merchants[0]
		set := []service.App{{Provider: model.ProviderWechatpay, Account: p.MchID(), ID: p.AppID(), Adapter: p}}
		for _, id := range p.AppIDs()[1:] {
			set = append(set, service.App{Provider: model.ProviderWechatpay, Account: p.MchID(), ID: id, Adapter: p.ForApp(id)})
		}
		return service.NewAppSet(set...)
	}
	var set []service.App
	for i, p := range merchants {
		for _, app := range apps[i] {
			a := service.App{Provider: model.ProviderWechatpay, Account: p.MchID(), ID: app.AppID, Name: app.Name, Adapter: p.ForApp(app.AppID)}
			for _, m := range app.Methods {
				a.Methods = append(a.Methods, model.PayMethod(m))
			}
			set = append(set, a)
		}
	}
	return service.NewAppSet(set...)
}
