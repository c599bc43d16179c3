"""`unirag serve`: an OpenAI-compatible HTTP API over the one model (interfaces layer).

app.py the FastAPI factory and routes; schemas.py request bodies and their limits; worker.py the
one-model queue; chat.py, embeddings.py, rerank.py what each endpoint runs; security.py the bind
check, API key and body limit; errors.py OpenAI's error shape; command.py the CLI command.
"""
