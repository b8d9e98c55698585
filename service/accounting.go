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
var AccountingEvents = []model.EventType{model.EventOrderPaid, model.EventRefundPending, model.EventRefunded,
	model.EventPaymentUnmatched, model.EventFeesBooked}

// Accounting is the exactly-once consumer that books payments into a
// double-entry journal:
//
//	order.paid                      debit <provider>_clearing / credit sales
//	payment.refund_pending          debit <provider>_clearing / credit refunds_payable
//	payment.refunded (owed back)    debit refunds_payable     / credit <provider>_clearing
//	payment.refunded (after-sale)   debit sales_returns       / credit <provider>_clearing
//	payment.refunded (console)      the same, or refunds_payable without an order
//	payment.unmatched               debit <provider>_clearing / credit refunds_payable
//	payment.fees_booked             debit fee_expense         / credit <provider>_clearing
//	                                (the other way round for fees given back)
//
// <provider>_clearing is the money the provider that moved it holds for
// us: alipay_clearing, wechatpay_clearing (model.ClearingAccount) for the
// provider's first account (and the events that name none, written before
// the ledger knew accounts), a sub-account for each other account the
// event names: wechatpay_clearing:1900054321.
type Accounting struct {
	store *dao.Store
	// First is each provider's first account (PROVIDERS_FILE's order, or
	// the one the environment configures): its money is in the provider's
	// clearing account itself.
	First map[model.Provider]string
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
	lines, err := a.journalLines(ev)
	if err != nil || len(lines) == 0 {
		return err // nothing to book for this type
	}
	duplicate := false
	err = a.store.UpdateJournal(ctx, func(ctx context.Context, tx *dao.JournalTx) error {
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

// clearing is the clearing account of provider p's account.
func (a *Accounting) clearing(p, account string) string {
	if account == a.First[model.Provider(p)] {
		account = ""
	}
	return model.ClearingAccount(model.Provider(p), account)
}

// journalLines are the balanced lines an event books (none for events the
// journal does not track).
func (a *Accounting) journalLines(ev model.Event) ([]model.JournalLine, error) {
	var debit, credit, amountText string
	var orderID int64
	var orderSN string
	switch ev.Type {
	case model.EventOrderPaid, model.EventRefundPending, model.EventPaymentUnmatched:
		var d model.PaymentEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		debit, credit = a.clearing(d.Provider, d.Account), model.AccountSales
		if ev.Type != model.EventOrderPaid {
			// Money we hold and owe back: it was not applied (or has no
			// order to be applied to).
			credit = model.AccountRefundsPayable
		}
		amountText, orderID, orderSN = d.Amount, d.OrderID, d.OrderSN
	case model.EventRefunded:
		var d model.RefundEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		debit, credit = model.AccountRefundsPayable, a.clearing(d.Provider, d.Account)
		if d.Kind == string(model.RefundAfterSale) || (d.Kind == string(model.RefundConsole) && d.OrderID != 0) {
			// A refund of a sale: an operator's, or one made from Alipay's
			// console and found in its bill.
			debit = model.AccountSalesReturns
		}
		amountText, orderID, orderSN = d.Amount, d.OrderID, d.OrderSN
	case model.EventFeesBooked:
		var d model.FeeEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		debit, credit = model.AccountFeeExpense, a.clearing(d.Provider, d.Account)
		fee, err := decimal.NewFromString(d.Amount)
		if err != nil {
			return nil, fmt.Errorf("event %s: amount %q", ev.ID, d.Amount)
		}
		if fee.IsNegative() {
			debit, credit = credit, debit
		}
		amountText, orderSN = fee.Abs().StringFixed(2), "bill "+d.BillDate
	default:
		return nil, nil
	}
	amount, err := decimal.NewFromString(amountText)
	if err != nil || !amount.IsPositive() {
		return nil, fmt.Errorf("event %s: amount %q", ev.ID, amountText)
	}
	line := model.JournalLine{EventID: ev.ID, EventType: ev.Type, OrderID: orderID, OrderSN: orderSN}
	debitLine, creditLine := line, line
	debitLine.Account, debitLine.Debit = debit, amount
	creditLine.Account, creditLine.Credit = credit, amount
	return []model.JournalLine{debitLine, creditLine}, nil
}
