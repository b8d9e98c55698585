package wechatpay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/config"
	"paynotify/internal/devkey"
	"paynotify/wechatpay"
)

// merchantCert is a certificate of key with serial, as the merchant
// platform issues apiclient_cert.pem (self-signed here: only its serial
// and key are read).
func merchantCert(t *testing.T, key *rsa.PrivateKey, serial *big.Int) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: mchID, Organization: []string{"paynotify test"}},
		NotBefore: time.Now().AddDate(0, 0, -1), NotAfter: time.Now().AddDate(5, 0, 0),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestMerchantCertFile: PROVIDERS_FILE's merchant_cert_file, where given,
// is taken when its serial is merchant_serial (as WeChat Pay writes it,
// case aside) and its key merchant_key_file's, and refused otherwise,
// each problem naming the file, the merchant and the field.
func TestMerchantCertFile(t *testing.T) {
	merchantKey := devkey.Read(t, "wechatpay_merchant_private_key.pem")
	key, err := wechatpay.ParsePrivateKey(merchantKey)
	if err != nil {
		t.Fatal(err)
	}
	other, err := wechatpay.ParsePrivateKey(devkey.Read(t, "wechatpay_platform_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// The serial's first byte is 0x0A: WeChat Pay writes it "0A…".
	serial, _ := new(big.Int).SetString("0A75B6A45ACD588826D15E583A95F5DD4F2B1E2F", 16)
	const written = "0A75B6A45ACD588826D15E583A95F5DD4F2B1E2F"

	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("apiclient_key.pem", merchantKey)
	apiv3File := write("apiv3", apiV3Key)
	publicKeyFile := write("pub_key.pem", devkey.Read(t, "wechatpay_public_key.pem"))
	ours := write("apiclient_cert.pem", merchantCert(t, key, serial))
	another := write("another_cert.pem", merchantCert(t, other, serial))
	notCert := write("not_cert.pem", merchantKey)

	for _, tc := range []struct {
		name, serial, certFile string
		want                   []string // in the error; none: accepted
	}{
		{name: "Matching", serial: written, certFile: ours},
		{name: "MatchingLowerCase", serial: strings.ToLower(written), certFile: ours},
		{name: "WrongSerial", serial: "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F", certFile: ours,
			want: []string{`merchant_serial "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F" is not the serial of merchant_cert_file ` + ours + ", which is " + written}},
		// WeChat Pay names the certificate "0A…": a serial written without
		// its leading zero would name no certificate of ours.
		{name: "SerialWithoutLeadingZero", serial: written[1:], certFile: ours,
			want: []string{fmt.Sprintf("merchant_serial %q is not the serial of merchant_cert_file %s, which is %s", written[1:], ours, written)}},
		{name: "AnotherKey", serial: written, certFile: another,
			want: []string{"merchant_cert_file " + another + " is the certificate of another key than merchant_key_file's"}},
		{name: "NotACertificate", serial: written, certFile: notCert,
			want: []string{"merchant_cert_file " + notCert + ": not a PEM certificate"}},
		{name: "Missing", serial: written, certFile: filepath.Join(dir, "absent.pem"),
			want: []string{"merchant_cert_file: open " + filepath.Join(dir, "absent.pem")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			providers := write("providers-"+tc.name+".yaml", fmt.Sprintf(`
wechatpay:
  - mchid: "1900000009"
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: %q
    public_key_file: %s
    public_key_id: %s
    apps: [{appid: %s}]
  - mchid: %q
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: %q
    merchant_cert_file: %s
    public_key_file: %s
    public_key_id: %s
    apps: [{appid: %s}]
`, apiv3File, keyFile, written, publicKeyFile, publicKeyID, appID,
				mchID, apiv3File, keyFile, tc.serial, tc.certFile, publicKeyFile, publicKeyID, appID))
			c, err := config.Load([]string{"PROVIDERS_FILE=" + providers})
			if err != nil {
				t.Fatal(err)
			}
			cfgs, _, err := wechatpay.FromConfigAll(c, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfgs) != 2 || cfgs[1].MerchantSerial != tc.serial {
					t.Fatalf("configurations %d, the second's serial %q", len(cfgs), cfgs[1].MerchantSerial)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			// The file and the account first, as every problem of the file.
			where := fmt.Sprintf(`%s: wechatpay[1] (mchid %q): `, providers, mchID)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), where+w) {
					t.Errorf("error does not say %q:\n%v", where+w, err)
				}
			}
			if problems := err.(*config.Error).Problems; len(problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(problems), len(tc.want), err)
			}
		})
	}
}
