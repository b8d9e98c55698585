-- +goose Up
-- No verified payment without a row: a payment whose out_trade_no names
-- no order is recorded UNMATCHED, with no order. Its refund, too, has no
-- order. refund_key is the operator's idempotency key for refunding an
-- UNMATCHED payment.
ALTER TABLE oms_order_payment
    MODIFY order_id BIGINT NULL,
    ADD COLUMN refund_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD KEY idx_oms_order_payment_paid_at (provider, paid_at);
ALTER TABLE oms_refund
    MODIFY order_id BIGINT NULL,
    ADD KEY idx_oms_refund_trade_no (provider, trade_no);

-- One reconciliation of Alipay's trade bill per (provider, bill date, in
-- Beijing time). An instance claims a date by compare-and-set on state
-- and lease; attempts count every try, recon_attempt keeps their history.
CREATE TABLE recon_run (
    id                    BIGINT        NOT NULL AUTO_INCREMENT,
    provider              VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    bill_date             CHAR(10)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state                 VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts              INT           NOT NULL DEFAULT 0,
    owner                 VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    lease_until           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    started_at            DATETIME(3)   NULL,
    finished_at           DATETIME(3)   NULL,
    error                 VARCHAR(500)  NOT NULL DEFAULT '',
    bill_payments         INT           NOT NULL DEFAULT 0,
    bill_payment_amount   DECIMAL(18,2) NOT NULL DEFAULT 0,
    bill_refunds          INT           NOT NULL DEFAULT 0,
    bill_refund_amount    DECIMAL(18,2) NOT NULL DEFAULT 0,
    bill_fees             DECIMAL(18,2) NOT NULL DEFAULT 0,
    ledger_payments       INT           NOT NULL DEFAULT 0,
    ledger_payment_amount DECIMAL(18,2) NOT NULL DEFAULT 0,
    ledger_refunds        INT           NOT NULL DEFAULT 0,
    ledger_refund_amount  DECIMAL(18,2) NOT NULL DEFAULT 0,
    create_time           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_recon_run_provider_date (provider, bill_date),
    KEY idx_recon_run_state (state, bill_date)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Every attempt at a run, kept.
CREATE TABLE recon_attempt (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    run_id      BIGINT       NOT NULL,
    attempt_no  INT          NOT NULL,
    owner       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state       VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    error       VARCHAR(500) NOT NULL DEFAULT '',
    items       INT          NOT NULL DEFAULT 0,
    repaired    INT          NOT NULL DEFAULT 0,
    started_at  DATETIME(3)  NOT NULL,
    finished_at DATETIME(3)  NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_recon_attempt_run_no (run_id, attempt_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- What a run found: one row per (run, outcome, reference) — a trade_no or
-- an out_request_no — with both sides' amounts. A re-run updates it;
-- an operator resolves it with a note.
CREATE TABLE recon_item (
    id             BIGINT        NOT NULL AUTO_INCREMENT,
    run_id         BIGINT        NOT NULL,
    attempt_no     INT           NOT NULL,
    outcome        VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    ref            VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    trade_no       VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    out_trade_no   VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    out_request_no VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    bill_amount    DECIMAL(18,2) NULL,
    ledger_amount  DECIMAL(18,2) NULL,
    detail         VARCHAR(500)  NOT NULL DEFAULT '',
    resolved_at    DATETIME(3)   NULL,
    resolved_by    VARCHAR(64)   NOT NULL DEFAULT '',
    note           VARCHAR(1000) NOT NULL DEFAULT '',
    create_time    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_recon_item_run_outcome_ref (run_id, outcome, ref)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Every bill line matched to the ledger, once: a payment by trade_no, a
-- refund by out_request_no. Its insert books the line's service fee (one
-- outbox event per batch), so a fee is booked once however often a date
-- is run; the ledger rows of a day without a line here are missing from
-- the bill.
CREATE TABLE recon_seen (
    provider    VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind        VARCHAR(8)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    ref         VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    bill_date   CHAR(10)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    trade_no    VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    amount      DECIMAL(18,2) NOT NULL,
    fee         DECIMAL(18,2) NOT NULL,
    create_time DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (provider, kind, ref)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE recon_seen;
DROP TABLE recon_item;
DROP TABLE recon_attempt;
DROP TABLE recon_run;
ALTER TABLE oms_refund DROP KEY idx_oms_refund_trade_no, MODIFY order_id BIGINT NOT NULL;
ALTER TABLE oms_order_payment DROP KEY idx_oms_order_payment_paid_at, DROP COLUMN refund_key, MODIFY order_id BIGINT NOT NULL;
