package dao

import "gorm.io/gorm"

// OnStatement calls fn with every statement s runs after it ran: its SQL
// (placeholders ?) and arguments.
func (s *Store) OnStatement(fn func(sql string, vars []any)) {
	capture := func(db *gorm.DB) { fn(db.Statement.SQL.String(), db.Statement.Vars) }
	cb := s.db.Callback()
	_ = cb.Query().After("gorm:query").Register("test:statement", capture)
	_ = cb.Row().After("gorm:row").Register("test:statement", capture)
	_ = cb.Update().After("gorm:update").Register("test:statement", capture)
	_ = cb.Delete().After("gorm:delete").Register("test:statement", capture)
	_ = cb.Raw().After("gorm:raw").Register("test:statement", capture)
}
