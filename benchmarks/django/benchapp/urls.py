from django.urls import path

from . import views

urlpatterns = [path("hit", views.hit)]
