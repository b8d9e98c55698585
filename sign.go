package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"paynotify/alipay"
)

// setFlags collects repeated -set k=v.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

const signUsage = `usage: paynotify sign [-key KEY.pem] [-set k=v ...] [FORM_FILE|-]

Reads a URL-encoded notification form (FORM_FILE, or standard input),
applies the -set changes, signs it by Alipay's rule and prints the signed
form, ready for curl --data @-. The default key is the development
"Alipay" key that paynotify dev trusts.
`

// sign reads a URL-encoded form (a file, or standard input), applies -set
// changes, signs it by Alipay's rule and prints the signed form, ready for
// curl --data @-.
func sign(env environment) error {
	flags := newFlags("sign", signUsage)
	keyFile := flags.String("key", "", "private key that signs (PEM or bare base64; default: the development \"Alipay\" key, built in)")
	var sets setFlags
	flags.Var(&sets, "set", "`k=v` to set before signing (repeatable; k= empties a field, which Alipay's rule leaves unsigned)")
	if err := parseFlags(flags, env, 1); err != nil {
		return err
	}
	var in io.Reader = env.stdin
	if name := flags.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	body, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return err
	}
	form, err := url.ParseQuery(strings.TrimSpace(string(body)))
	if err != nil {
		return fmt.Errorf("form: %w", err)
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-set %q: want k=v", kv)
		}
		form.Set(k, v)
	}
	key := devKey("alipay_private_key.pem") // built in: sign works from any directory
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		key = string(b)
	}
	signed, err := alipay.SignForm(key, form)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.stdout, signed.Encode())
	return err
}
