package console

import (
	"cmp"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"paynotify/model"
)

// piece is a run of a timeline sentence: plain words, or an id that links
// to its timeline (Href set).
type piece struct {
	Text string
	Href string
}

// ref is an id inside a sentence, with where it leads.
type ref piece

// tradeRef is a provider's trade number, leading to its payment (and from
// there its order).
func tradeRef(p model.Provider, tradeNo string) ref {
	return ref{Text: tradeNo, Href: payLink(p, tradeNo)}
}

// searchRef is an id the search box resolves (out_request_no, out_trade_no).
func searchRef(id string) ref {
	return ref{Text: id, Href: Prefix + "/search?q=" + url.QueryEscape(id)}
}

// memberRef is a member id, leading to the member's orders.
func memberRef(id int64) ref { return searchRef(strconv.FormatInt(id, 10)) }

// say makes a sentence of strings (words) and refs (linked ids); words
// next to each other are joined.
func say(parts ...any) []piece {
	var out []piece
	for _, p := range parts {
		switch p := p.(type) {
		case ref:
			out = append(out, piece(p))
		case string:
			if p == "" {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Href == "" {
				out[n-1].Text += p
				continue
			}
			out = append(out, piece{Text: p})
		default:
			out = append(out, piece{Text: fmt.Sprint(p)})
		}
	}
	return out
}

// refundStory tells each refund's story: its request, then every recorded
// state change in order. A refund recorded before changes were kept
// (none recorded) shows its request and how it ended, from its row.
func refundStory(refunds []model.Refund, changes []model.RefundChange, audit []model.Audit) []moment {
	// Who asked for each refund, where an operator did: the audit row of
	// the action that made it names its payment or its out_request_no.
	askedBy := map[string]string{}
	for _, a := range audit {
		if a.Action == model.AuditPaymentRefund || a.Action == model.AuditOrderRefund {
			askedBy[a.TargetID] = a.Operator
		}
	}
	of := map[string][]model.RefundChange{}
	for _, c := range changes {
		of[c.OutRequestNo] = append(of[c.OutRequestNo], c)
	}
	var s []moment
	for _, f := range refunds {
		asked := moment{At: f.CreateTime, Kind: "refund", Title: "Refund requested: " + refundKindWords(f.Kind),
			Detail: say(money(f.Amount)+" of trade ", tradeRef(f.Provider, f.TradeNo), ", out_request_no ", searchRef(f.OutRequestNo)),
			State:  string(model.RefundRefunding)}
		cs := of[f.OutRequestNo]
		if len(cs) == 0 {
			asked.State = string(f.State)
			s = append(s, asked)
			s = append(s, refundEnd(f)...)
			continue
		}
		for _, c := range cs {
			if c.From == "" && c.To == model.RefundRefunding {
				asked.At = c.CreateTime
				switch by := cmp.Or(c.By, askedBy[f.OutRequestNo], askedBy[f.TradeNo]); {
				case by != "":
					asked.Title += ", by " + by
				case f.Kind == model.RefundAuto:
					asked.Title += ", by the refund worker"
				}
				s = append(s, asked)
				continue
			}
			s = append(s, refundChange(f, c))
		}
	}
	return s
}

// refundKindWords says what kind of refund f is.
func refundKindWords(k model.RefundKind) string {
	switch k {
	case model.RefundAuto:
		return "money owed back, in full"
	case model.RefundAfterSale:
		return "after-sale"
	case model.RefundConsole:
		return "made in the provider's own console"
	}
	return strings.ToLower(string(k))
}

// refundChange says what one recorded change of refund f was.
func refundChange(f model.Refund, c model.RefundChange) moment {
	no := searchRef(f.OutRequestNo)
	m := moment{At: c.CreateTime, Kind: "refund", State: string(c.To)}
	switch {
	case c.From == "":
		m.Title = "Refund found in " + f.Provider.Name() + "'s bill"
		m.Detail = say(money(f.Amount)+" of trade ", tradeRef(f.Provider, f.TradeNo), ", out_request_no ", no)
	case c.From == model.RefundRefunding && c.To == model.RefundRefunding:
		m.Title = "Refund outcome unknown: asked again later"
		m.Detail = say("out_request_no ", no, ": "+c.Note)
	case c.To == model.RefundRefunded && c.By != "":
		m.Title = "Refund settled by " + c.By
		m.Detail = say("out_request_no ", no, ": "+c.Note)
	case c.To == model.RefundRefunded:
		m.Title = "Refund confirmed by " + f.Provider.Name()
		m.Detail = say("out_request_no ", no)
	case c.From == model.RefundFailed && c.To == model.RefundRefunding:
		m.Title = "Refund retried by " + c.By
		m.Detail = say("out_request_no ", no, " sent to "+f.Provider.Name()+" again")
	case c.From == model.RefundFailed && c.To == model.RefundFailed:
		m.Title = "Refund resolved by " + c.By
		m.Detail = say("out_request_no ", no, ": "+c.Note)
		m.State = ""
	case c.To == model.RefundFailed:
		m.Title = "Refund failed"
		m.Detail = say("out_request_no ", no, ": "+c.Note)
	default:
		m.Title = fmt.Sprintf("Refund %s → %s", c.From, c.To)
		m.Detail = say("out_request_no ", no, ": "+c.Note)
	}
	if c.Note == "" && len(m.Detail) > 0 {
		m.Detail[len(m.Detail)-1].Text = strings.TrimSuffix(m.Detail[len(m.Detail)-1].Text, ": ")
	}
	return m
}

// refundEnd is how a refund without recorded changes ended, from its row.
func refundEnd(f model.Refund) []moment {
	switch {
	case f.ResolvedTime != nil:
		// A resolution rewrites update_time: it stands for the end.
		return []moment{{At: *f.ResolvedTime, Kind: "refund", Title: "Refund resolved by " + f.ResolvedBy, Detail: say(f.Resolution)}}
	case f.State == model.RefundRefunded || f.State == model.RefundFailed:
		detail := say("out_request_no ", searchRef(f.OutRequestNo), fmt.Sprintf(" after %d attempt(s)", f.Attempts))
		if f.LastError != "" {
			detail = append(detail, say(": "+f.LastError)...)
		}
		title := "Refund confirmed by " + f.Provider.Name()
		if f.State == model.RefundFailed {
			title = "Refund failed"
		}
		return []moment{{At: f.UpdateTime, Kind: "refund", Title: title, Detail: detail, State: string(f.State)}}
	}
	return nil
}
