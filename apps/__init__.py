"""Applications built on unirag: `gradio_app` is the chat-over-documents web UI (`unirag app`)."""
