package alipay

import (
	"fmt"
	"net/url"

	"paynotify/model"
)

// Apps are the Alipay apps paynotify takes payment in, every seller's,
// each with its own Client (its own key pair). A notification is routed
// by the app_id it names and verified with that app's key only; its
// seller_id must be the app's seller.
type Apps struct {
	clients []*Client
	// byID is built once: routing costs one map lookup, however many
	// apps are configured.
	byID map[string]*Client
}

// NewApps is the set of clients, in configuration order (the first is
// the default app); no two may share an app_id.
func NewApps(clients ...*Client) (*Apps, error) {
	a := &Apps{byID: map[string]*Client{}}
	for _, c := range clients {
		if _, dup := a.byID[c.appID]; dup {
			return nil, fmt.Errorf("alipay: app_id %q configured twice", c.appID)
		}
		a.byID[c.appID] = c
		a.clients = append(a.clients, c)
	}
	if len(a.clients) == 0 {
		return nil, fmt.Errorf("alipay: no app")
	}
	return a, nil
}

// Clients are the apps' clients, in configuration order.
func (a *Apps) Clients() []*Client { return append([]*Client(nil), a.clients...) }

// First is the default app's client: the first seller's first app.
func (a *Apps) First() *Client { return a.clients[0] }

// route is the client of the app form names. An app_id not configured
// is model.ErrUnknownApp naming the app_id and seller_id it gave: no key
// of ours can say whether Alipay signed it, and nothing of it is taken.
func (a *Apps) route(form url.Values) (*Client, error) {
	c, ok := a.byID[form.Get(fieldAppID)]
	if !ok {
		return nil, fmt.Errorf("%w: app_id %q (seller_id %q) is not ours", model.ErrUnknownApp, model.Clip(form.Get(fieldAppID)), model.Clip(form.Get(fieldSellerID)))
	}
	return c, nil
}
