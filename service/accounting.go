package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// AccountingEvents are the events the accounting journal books.
var AccountingEvents = []model.EventType{model.EventOrderPaid, model.EventRefundPending}

// Accounting is the exactly-once consumer that books payments into a
// double-entry journal:
//
//	order.paid              debit alipay_clearing / credit sales
//	payment.refund_pending  debit alipay_clearing / credit refunds_payable
type Accounting struct {
	store *dao.Store
	// OnBooked, if set, is told whether each event was booked or was a
	// duplicate.
	OnBooked func(duplicate bool)
}

// NewAccounting returns the accounting consumer over store.
func NewAccounting(store *dao.Store) *Accounting { return &Accounting{store: store} }

// Book books one event, once: in one transaction it records
// CONSUME:<event id> in idempotent_log and writes the journal lines; a
// second delivery finds the key and does nothing. Return nil only after
// commit, so the broker acknowledges only what is booked.
func (a *Accounting) Book(ctx context.Context, ev model.Event) error {
	lines, err := journalLines(ev)
	if err != nil || len(lines) == 0 {
		return err // nothing to book for this type
	}
	duplicate := false
	err = inTx(ctx, a.store, func(tx *dao.Store) error {
		fresh, err := tx.RecordOnce(ctx, "CONSUME:"+ev.ID)
		if err != nil {
			return err
		}
		duplicate = !fresh
		if !fresh {
			return nil
		}
		return tx.InsertJournal(ctx, lines)
	})
	if err == nil && a.OnBooked != nil {
		a.OnBooked(duplicate)
	}
	return err
}

// journalLines are the balanced lines an event books (none for events the
// journal does not track).
func journalLines(ev model.Event) ([]model.JournalLine, error) {
	var credit string
	switch ev.Type {
	case model.EventOrderPaid:
		credit = model.AccountSales
	case model.EventRefundPending:
		credit = model.AccountRefundsPayable
	default:
		return nil, nil
	}
	var d model.PaymentEventData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil || !amount.IsPositive() {
		return nil, fmt.Errorf("event %s: amount %q", ev.ID, d.Amount)
	}
	line := model.JournalLine{EventID: ev.ID, EventType: ev.Type, OrderID: d.OrderID, OrderSN: d.OrderSN}
	debitLine, creditLine := line, line
	debitLine.Account, debitLine.Debit = model.AccountAlipayClearing, amount
	creditLine.Account, creditLine.Credit = credit, amount
	return []model.JournalLine{debitLine, creditLine}, nil
}
