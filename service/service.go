// Package service holds paynotify's use cases. Each decides what one
// transaction does — through dao's entry points (UpdateOrder, PlaceOrder,
// UpdateOutbox, UpdateJournal), which open it, take its first lock, keep
// the lock order and retry deadlocks — and the background jobs that run
// beside the HTTP server (see Job). The decisions themselves live in
// model, the SQL in dao.
package service
