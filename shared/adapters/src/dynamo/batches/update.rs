//! Updates of one row (the batch row, an item row) built clause by clause, as a transaction's
//! action or an `UpdateItem`: every move of an item is one of each in a transaction.

use crate::dynamo::table::{n, Item, PK};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;

/// One row's update built clause by clause: counters moved, attributes set, conditions, each with
/// placeholders of its own (`#a{n}`, `:a{n}`), so a clause never clashes with another.
#[derive(Debug, Default)]
pub(super) struct RowUpdate {
    sets: Vec<String>,
    conditions: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl RowUpdate {
    fn name(&mut self, attribute: &str) -> String {
        let name = format!("#a{}", self.names.len());
        self.names.insert(name.clone(), attribute.to_owned());
        name
    }

    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":a{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// Adds `by` to counter `attribute` (subtracts, when negative).
    pub(super) fn add(mut self, attribute: &str, by: i64) -> Self {
        if by != 0 {
            let (name, value) = (self.name(attribute), self.value(n(by.unsigned_abs())));
            self.sets.push(format!("{name} = {name} {} {value}", if by < 0 { '-' } else { '+' }));
        }
        self
    }

    pub(super) fn set(mut self, attribute: &str, value: AttributeValue) -> Self {
        let (name, value) = (self.name(attribute), self.value(value));
        self.sets.push(format!("{name} = {value}"));
        self
    }

    pub(super) fn set_if_absent(mut self, attribute: &str, value: AttributeValue) -> Self {
        let (name, value) = (self.name(attribute), self.value(value));
        self.sets.push(format!("{name} = if_not_exists({name}, {value})"));
        self
    }

    /// On condition that `attribute` holds `value` (which a missing row never does).
    pub(super) fn when(mut self, attribute: &str, value: AttributeValue) -> Self {
        let (name, value) = (self.name(attribute), self.value(value));
        self.conditions.push(format!("{name} = {value}"));
        self
    }

    /// On condition that the row exists.
    pub(super) fn when_present(mut self) -> Self {
        let name = self.name(PK);
        self.conditions.push(format!("attribute_exists({name})"));
        self
    }

    pub(super) fn when_absent(mut self, attribute: &str) -> Self {
        let name = self.name(attribute);
        self.conditions.push(format!("attribute_not_exists({name})"));
        self
    }

    pub(super) fn expressions(
        self,
    ) -> (String, Option<String>, HashMap<String, String>, HashMap<String, AttributeValue>) {
        let condition = (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "));
        (format!("SET {}", self.sets.join(", ")), condition, self.names, self.values)
    }

    /// As one action of a transaction.
    pub(super) fn in_transaction(self, table: &str, key: Item) -> TransactWriteItem {
        let (update, condition, names, values) = self.expressions();
        let update = Update::builder()
            .table_name(table)
            .set_key(Some(key))
            .update_expression(update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("table, key and expression are set");
        TransactWriteItem::builder().update(update).build()
    }

    /// As an `UpdateItem` request, to send.
    pub(super) fn request(self, client: &Client, table: &str, key: Item) -> UpdateItemFluentBuilder {
        let (update, condition, names, values) = self.expressions();
        client
            .update_item()
            .table_name(table)
            .set_key(Some(key))
            .update_expression(update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
    }
}
