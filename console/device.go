package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// deviceCookie marks a browser in which an operator has signed in: it
// exempts that browser's sign-ins as that operator from every limit a
// stranger could spend (signInLimits), the per-(address, name) one too.
// It holds the name, an expiry and a MAC keyed by the operator's own
// password hash (or the admin token), so only someone who signed in can
// have one, it outlives restarts and instances, and a changed password
// voids it.
const (
	deviceCookie = "paynotify_console_device"
	deviceTTL    = 90 * 24 * time.Hour
)

// deviceMAC is the MAC of a device cookie for name until expiry, or nil
// for a name nobody can sign in as.
func (c *Console) deviceMAC(name string, expiry int64) []byte {
	secret := c.d.AdminToken
	if len(c.d.Operators) > 0 {
		secret = c.d.Operators[name]
	} else if name != adminOperator {
		secret = ""
	}
	if secret == "" {
		return nil
	}
	key := sha256.Sum256([]byte("paynotify console device\x00" + secret))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(name + ":" + strconv.FormatInt(expiry, 10)))
	return m.Sum(nil)
}

// setDevice gives the browser a device cookie for name.
func (c *Console) setDevice(w http.ResponseWriter, r *http.Request, name string) {
	expiry := c.d.Now().Add(deviceTTL).Unix()
	mac := c.deviceMAC(name, expiry)
	if mac == nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: deviceCookie, Value: name + ":" + strconv.FormatInt(expiry, 10) + ":" + hex.EncodeToString(mac),
		Path: Prefix + "/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: int(deviceTTL / time.Second)})
}

// device is the live device cookie for name the request carries (its
// MAC, in hex), or "" when it carries none: a cookie issued to another
// operator counts for nothing.
func (c *Console) device(r *http.Request, name string) string {
	ck, err := r.Cookie(deviceCookie)
	if err != nil {
		return ""
	}
	parts := strings.Split(ck.Value, ":")
	if len(parts) != 3 || parts[0] != name {
		return ""
	}
	expiry, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || c.d.Now().Unix() >= expiry {
		return ""
	}
	got, err := hex.DecodeString(parts[2])
	want := c.deviceMAC(name, expiry)
	if err != nil || want == nil || !hmac.Equal(got, want) {
		return ""
	}
	return parts[2]
}

// nameTagKey is this process's key for nameTag.
var nameTagKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// nameTag stands for a typed operator name in logs: the same name gives
// the same tag within one process, so attempts can be told apart, but the
// tag does not give the name back — a password typed into the name field
// is never logged.
func nameTag(name string) string {
	m := hmac.New(sha256.New, nameTagKey)
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil)[:8])
}
