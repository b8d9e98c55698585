// Package model holds paynotify's domain: orders, payments, the notifications
// that report them and the decision that joins the two. It imports only the
// standard library and the decimal type used for money.
package model
