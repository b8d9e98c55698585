package wechatpay

import (
	"fmt"
	"os"
	"strings"

	"paynotify/config"
)

// FromConfig resolves the WeChat Pay settings of c (values or files) into
// a client configuration, parsing the keys itself (New names what is
// wrong). It names every missing or malformed variable in one error (a
// *config.Error, to join with Load's), and refuses any key in devKeys. ok
// is false, with no error, when WeChat Pay is off.
func FromConfig(c config.Config, devKeys []string) (cfg Config, ok bool, err error) {
	w := c.WeChatPay
	if c.Accounts != nil {
		return fromFile(*c.Accounts, devKeys)
	}
	if !w.On() {
		return Config{}, false, nil
	}
	var errs []error
	cfg = Config{MchID: w.MchID, AppID: w.AppID, MerchantSerial: w.MerchantSerial,
		PublicKeyID: w.PublicKeyID, Gateway: w.Gateway, Refuse: devKeys}
	if cfg.APIv3Key, err = config.ValueOrFile("WECHATPAY_APIV3_KEY", w.APIv3Key, w.APIv3KeyFile); err != nil {
		errs = append(errs, err)
	}
	read := func(name, path string) string {
		if path == "" {
			return ""
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		return string(b)
	}
	cfg.MerchantPrivateKey = read("WECHATPAY_MERCHANT_KEY_FILE", w.MerchantKeyFile)
	cfg.PublicKey = read("WECHATPAY_PUBLIC_KEY_FILE", w.PublicKeyFile)
	for _, f := range strings.Split(w.PlatformCertFiles, ",") {
		if f = strings.TrimSpace(f); f != "" {
			if pem := read("WECHATPAY_PLATFORM_CERT_FILES", f); pem != "" {
				cfg.PlatformCerts = append(cfg.PlatformCerts, pem)
			}
		}
	}
	if len(errs) == 0 {
		// New checks every value and names what is wrong.
		if _, err := New(cfg); err != nil {
			if joined, ok := err.(interface{ Unwrap() []error }); ok {
				errs = append(errs, joined.Unwrap()...)
			} else {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return cfg, true, config.Join(errs...)
	}
	return cfg, true, nil
}

// FromConfigAll is FromConfig of every merchant: PROVIDERS_FILE's, in its
// order, or the one WECHATPAY_* configures. Every merchant's problems are
// named at once.
func FromConfigAll(c config.Config, devKeys []string) ([]Config, bool, error) {
	if c.Accounts == nil {
		cfg, ok, err := FromConfig(c, devKeys)
		if !ok {
			return nil, false, err
		}
		return []Config{cfg}, true, err
	}
	var cfgs []Config
	var errs []error
	for i := range c.Accounts.WeChatPay {
		cfg, ok, err := fromFileAt(*c.Accounts, i, devKeys)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			cfgs = append(cfgs, cfg)
		}
	}
	return cfgs, len(cfgs) > 0, config.Join(errs...)
}

// fromFile is FromConfig for PROVIDERS_FILE's first merchant.
func fromFile(a config.Accounts, devKeys []string) (Config, bool, error) {
	return fromFileAt(a, 0, devKeys)
}

// fromFileAt is FromConfig for PROVIDERS_FILE's merchant i: its first
// appid and APIv3 key as the variables would give them, its other appids
// and keys beside, and its merchant_cert_file (where given) checked
// against its merchant_serial and merchant_key_file; every problem names
// the file and the merchant.
func fromFileAt(a config.Accounts, i int, devKeys []string) (Config, bool, error) {
	w, ok := a.WeChatPayEnvAt(i)
	if !ok {
		return Config{}, false, nil
	}
	acc := a.WeChatPay[i]
	where := a.Where("wechatpay", i, "mchid", acc.MchID)
	cfg, _, err := FromConfig(config.Config{WeChatPay: w}, devKeys)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, app := range acc.Apps[1:] {
		cfg.AppIDs = append(cfg.AppIDs, app.AppID)
	}
	if acc.MerchantCertFile != "" {
		if b, err := os.ReadFile(acc.MerchantCertFile); err != nil {
			errs = append(errs, fmt.Errorf("merchant_cert_file: %w", err))
		} else {
			errs = append(errs, checkMerchantCert(acc.MerchantCertFile, string(b), cfg.MerchantPrivateKey, acc.MerchantSerial)...)
		}
	}
	for i, f := range acc.APIv3KeyFiles[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("apiv3_key_files[%d]: %w", i+1, err))
			continue
		}
		key := strings.TrimSpace(string(b))
		if len(key) != 32 {
			errs = append(errs, fmt.Errorf("apiv3_key_files[%d] %s: an APIv3 key is 32 bytes, this is %d", i+1, f, len(key)))
			continue
		}
		cfg.OldAPIv3Keys = append(cfg.OldAPIv3Keys, key)
	}
	if err := config.Join(errs...); err != nil {
		var problems []string
		for _, p := range err.(*config.Error).Problems {
			problems = append(problems, where+": "+p)
		}
		return cfg, true, &config.Error{Problems: problems}
	}
	return cfg, true, nil
}
