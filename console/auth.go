package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"paynotify/model"
)

const (
	sessionCookie = "paynotify_console"
	// loginCookie carries the sign-in form's anti-forgery value (double
	// submit): no session exists yet to hold one.
	loginCookie = "paynotify_console_login"
	// adminOperator is who signs in with ADMIN_TOKEN when no operator is
	// configured.
	adminOperator = "admin"
)

type sessionKey struct{}

// session is the signed-in operator of a request that passed signedIn.
func session(r *http.Request) model.Session {
	s, _ := r.Context().Value(sessionKey{}).(model.Session)
	return s
}

// PasswordCost is the bcrypt cost of the hashes `paynotify hash-password`
// makes: about a quarter of a second per sign-in on a small machine.
const PasswordCost = 12

// dummyHashFor is compared against when the operator is unknown, so that
// an unknown name costs what a wrong password costs: it has the highest
// cost of the configured hashes (PasswordCost for hash-password's).
func dummyHashFor(operators map[string]string) []byte {
	cost := 0
	for _, h := range operators {
		if c, err := bcrypt.Cost([]byte(h)); err == nil {
			cost = max(cost, c)
		}
	}
	if cost == 0 {
		return nil // no operator: the admin token signs in, no bcrypt
	}
	h, err := bcrypt.GenerateFromPassword([]byte("paynotify-console-no-such-operator"), cost)
	if err != nil {
		panic(err) // a cost bcrypt.Cost read back is always valid
	}
	return h
}

// signedIn admits a request with a live session of an operator who is
// still configured; others are sent to sign in (a page) or refused.
func (c *Console) signedIn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ses, err := c.currentSession(r)
		if err != nil {
			if !errors.Is(err, model.ErrNoSession) {
				c.fail(w, r, err)
				return
			}
			c.clearCookie(w, r, sessionCookie)
			if r.Method != http.MethodGet {
				c.status(w, r, http.StatusUnauthorized, "Sign in first.")
				return
			}
			http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ses)))
	}
}

func (c *Console) currentSession(r *http.Request) (model.Session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return model.Session{}, model.ErrNoSession
	}
	ses, err := c.d.Sessions.Session(r.Context(), ck.Value)
	if err != nil {
		return ses, err
	}
	if !c.known(ses.Operator) {
		// Removed from the configuration since signing in.
		return model.Session{}, model.ErrNoSession
	}
	return ses, nil
}

func (c *Console) known(operator string) bool {
	if len(c.d.Operators) > 0 {
		_, ok := c.d.Operators[operator]
		return ok
	}
	return c.d.AdminToken != "" && operator == adminOperator
}

// changing admits a form that changes something: signed in, from a page
// of this console (Origin, when the browser sends it), and carrying the
// session's anti-forgery token.
func (c *Console) changing(next http.HandlerFunc) http.HandlerFunc {
	return c.signedIn(func(w http.ResponseWriter, r *http.Request) {
		if !c.sameOrigin(r) || !equal(r.PostFormValue("csrf"), session(r).CSRFToken) {
			c.status(w, r, http.StatusForbidden, "This form has expired or did not come from the console. Go back, reload the page and try again.")
			return
		}
		next(w, r)
	})
}

// sameOrigin refuses a request whose Origin names another site than the
// one it reached: its Host, the X-Forwarded-Host a proxy in front says,
// or PUBLIC_URL's host (a proxy that rewrites Host and says nothing). A
// browser's cross-site form can set none of these.
func (c *Console) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // older browsers and curl: the token decides
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null" among others
	}
	return u.Host == r.Host || u.Host == r.Header.Get("X-Forwarded-Host") || (c.d.PublicHost != "" && u.Host == c.d.PublicHost)
}

// validToken: 64 hex digits, as randomToken makes.
func validToken(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// equal compares secrets in constant time.
func equal(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

type loginData struct {
	page
	Next string
	// Name is the operator name typed, shown again after a failure.
	Name      string
	Error     string
	LoginCSRF string
	AdminOnly bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, err := c.currentSession(r); err == nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, "", "")
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, operator, msg string) {
	// One value per browser, kept while it is valid: a second tab, or the
	// page loaded twice, must not invalidate the form already shown.
	var token string
	if ck, err := r.Cookie(loginCookie); err == nil && validToken(ck.Value) {
		token = ck.Value
	} else {
		token = randomToken()
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: token, Path: Prefix + "/login", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: 3600})
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostFormValue("next")
	}
	c.render(w, r, status, "login", loginData{page: c.page(r, "Sign in"), Next: safeNext(next), Name: operator,
		Error: msg, LoginCSRF: token, AdminOnly: len(c.d.Operators) == 0})
}

// login checks an operator's name and password and opens a session.
// Every try is counted before the password is checked (signInLimits); an
// unknown name costs what a wrong password costs, and the typed name is
// logged only as a tag.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("operator"))
	password := r.PostFormValue("password")
	ck, err := r.Cookie(loginCookie)
	if err != nil || !c.sameOrigin(r) || !equal(r.PostFormValue("login_csrf"), ck.Value) {
		c.d.Log.Warn("console sign-in form refused", "cookie", err == nil, "same_origin", c.sameOrigin(r))
		c.renderLogin(w, r, http.StatusForbidden, name, "The sign-in form expired. Try again.")
		return
	}
	limits := signInLimits(clientAddr(r), name, c.device(r, name))
	if wait := c.limiter.take(limits); wait > 0 {
		w.Header().Set("Retry-After", seconds(wait))
		c.d.Log.Warn("console sign-in refused: too many tries", "operator_tag", nameTag(name), "addr", clientAddr(r))
		c.renderLogin(w, r, http.StatusTooManyRequests, name, "Too many failed attempts. Wait "+wait.Round(time.Second).String()+" and try again.")
		return
	}
	if !c.checkPassword(name, password) {
		c.d.Log.Warn("console sign-in failed", "operator_tag", nameTag(name), "addr", clientAddr(r))
		c.renderLogin(w, r, http.StatusUnauthorized, name, "Wrong operator or password.")
		return
	}
	c.limiter.giveBack(limits)
	token, ses, err := c.d.Sessions.SignIn(r.Context(), name)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.clearCookie(w, r, loginCookie)
	c.setDevice(w, r, name)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r), Expires: ses.ExpiresAt,
		MaxAge: int(time.Until(ses.ExpiresAt).Seconds())})
	c.d.Log.Info("console sign-in", "operator", name)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// checkPassword compares in constant time (bcrypt, or the token's hash).
func (c *Console) checkPassword(name, password string) bool {
	if len(c.d.Operators) == 0 {
		if c.d.AdminToken == "" {
			return false
		}
		// Hash both sides so the comparison's time says nothing of length.
		got, want := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(c.d.AdminToken))
		ok := subtle.ConstantTimeCompare(got[:], want[:]) == 1
		return ok && name == adminOperator
	}
	hash, ok := c.d.Operators[name]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(c.dummyHash, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if err := c.d.Sessions.SignOut(r.Context(), session(r)); err != nil {
		c.fail(w, r, err)
		return
	}
	c.clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// setZone stores the zone the operator reads times in.
func (c *Console) setZone(w http.ResponseWriter, r *http.Request) {
	zone := r.PostFormValue("zone")
	if _, err := loadZone(zone); err != nil {
		c.status(w, r, http.StatusBadRequest, "Unknown time zone.")
		return
	}
	if err := c.d.Sessions.SetZone(r.Context(), session(r), zone); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// secure says whether cookies must be Secure: the request came over
// HTTPS, directly or through a proxy that says so.
func (c *Console) secure(r *http.Request) bool {
	return c.d.SecureCookies || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	path := Prefix
	if name == loginCookie {
		path = Prefix + "/login"
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.secure(r), MaxAge: -1})
}

// safeNext keeps a redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return next
}

// clientAddr is the client's address as the HTTP surface worked it out
// (gin's ClientIP under TRUSTED_PROXIES, in the request's context); a
// console served on its own has only the connection's.
func clientAddr(r *http.Request) string {
	if addr, ok := model.ClientAddr(r.Context()); ok {
		return addr
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
