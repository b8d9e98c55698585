-- +goose Up
-- Every state change of a refund, as it happens, in the transaction of the
-- change (append-only): the console's timeline shows a refund's whole
-- story — asked, each retry with its error, an operator's retry or
-- resolution, confirmed, failed, settled by reconciliation.
CREATE TABLE oms_refund_change (
    id             BIGINT       NOT NULL AUTO_INCREMENT,
    out_request_no VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- '' when the refund was recorded by this change.
    from_state     VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    to_state       VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- The operator, or reconciliation; '' for the refund worker.
    changed_by     VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    -- Alipay's error, or the operator's note.
    note           VARCHAR(500) NOT NULL DEFAULT '',
    create_time    DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY idx_oms_refund_change_out_request_no (out_request_no, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE oms_refund_change;
