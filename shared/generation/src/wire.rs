//! The Chat Completions wire format, as much of it as generation uses: what the client sends and
//! reads, and what the test server reads and answers.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: String) -> Self {
        Self { role: role.to_owned(), content }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ChatResponse {
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Choice {
    pub message: AnswerMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct AnswerMessage {
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    /// A model's refusal under structured output (OpenAI), in place of content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

/// The structured answer asked for with `response_format`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StructuredAnswer {
    pub verilog: String,
    #[serde(default)]
    pub pcf: Option<String>,
    pub top: String,
}

/// The schema name sent with `response_format`.
pub(crate) const SCHEMA_NAME: &str = "verilog_design";

/// `response_format` asking for a [`StructuredAnswer`] (strict: every field required, `pcf`
/// nullable, nothing else).
pub(crate) fn response_format() -> serde_json::Value {
    serde_json::json!({
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "verilog": { "type": "string", "description": "The complete synthesizable Verilog source." },
                    "pcf": { "type": ["string", "null"], "description": "A pin constraints file, or null." },
                    "top": { "type": "string", "description": "The top module's name." }
                },
                "required": ["verilog", "pcf", "top"],
                "additionalProperties": false
            }
        }
    })
}

/// What an error body says, in the shapes servers use: OpenAI and vLLM
/// `{"error": {"message", "param", "type"}}`, Ollama and others `{"error": "…"}`, or plain text.
pub(crate) struct ErrorText {
    pub message: String,
    pub param: Option<String>,
}

pub(crate) fn error_text(body: &[u8]) -> ErrorText {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return ErrorText { message: text.trim().to_owned(), param: None };
    };
    let error = value.get("error").unwrap_or(&value);
    let message = match error {
        serde_json::Value::String(s) => s.clone(),
        other => other.get("message").and_then(|m| m.as_str()).map(str::to_owned).unwrap_or_else(|| other.to_string()),
    };
    let param = error.get("param").and_then(|p| p.as_str()).map(str::to_owned);
    ErrorText { message, param }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_reads_openai_ollama_and_plain_bodies() {
        let openai = error_text(br#"{"error":{"message":"bad","param":"response_format","type":"x"}}"#);
        assert_eq!((openai.message.as_str(), openai.param.as_deref()), ("bad", Some("response_format")));
        assert_eq!(error_text(br#"{"error":"model not found"}"#).message, "model not found");
        assert_eq!(error_text(b"upstream down\n").message, "upstream down");
    }
}
