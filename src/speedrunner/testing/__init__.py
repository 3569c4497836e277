"""Test helpers that ship with the package (so other packages' tests and demos can use them).

``fake_llm_server.FakeLLMServer`` is an OpenAI-compatible + Gemini HTTP server on 127.0.0.1;
``realistic.RealisticFake`` answers every prompt of the project like a real model would
(served by ``speedrunner fake-llm``). Nothing in ``speedrunner`` proper imports this package
except that command.
"""
